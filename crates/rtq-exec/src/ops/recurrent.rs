//! Recurrent layers: LSTM, GRU and RNN (ONNX opset 14 semantics): forward, reverse and
//! bidirectional, `sequence_lens`, initial states, peepholes, `clip`, `input_forget`,
//! `linear_before_reset`, both layouts and every activation function the spec names.
//!
//! The input projection `X W^T + Wb (+ Rb)` of every time step is one SGEMM per
//! direction; each step then adds `H R^T` for the whole batch. Steps past a batch
//! entry's sequence length leave its state unchanged and write zeros to `Y`.

use crate::ctx::OpCtx;
use crate::float::tensor_from_f32;
use crate::gemm::{sgemm, Mat};
use crate::registry::Kernel;
use crate::ExecError;
use rtq_ir::{Attr, Tensor};

/// Recurrent kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[("LSTM", lstm), ("GRU", gru), ("RNN", rnn)];

fn lstm(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    recurrent(ctx, Cell::Lstm)
}

fn gru(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    recurrent(ctx, Cell::Gru)
}

fn rnn(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    recurrent(ctx, Cell::Rnn)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cell {
    Rnn,
    Gru,
    Lstm,
}

impl Cell {
    /// Gates stacked in W and R: RNN `i`, GRU `z r h`, LSTM `i o f c`.
    fn gates(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru => 3,
            Cell::Lstm => 4,
        }
    }

    /// The activation functions of one direction, by default.
    fn default_activations(self) -> &'static [&'static str] {
        match self {
            Cell::Rnn => &["Tanh"],
            Cell::Gru => &["Sigmoid", "Tanh"],
            Cell::Lstm => &["Sigmoid", "Tanh", "Tanh"],
        }
    }
}

/// One activation function with its parameters.
#[derive(Debug, Clone, Copy)]
struct Activation {
    kind: ActKind,
    alpha: f32,
    beta: f32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ActKind {
    Relu,
    Tanh,
    Sigmoid,
    Affine,
    LeakyRelu,
    ThresholdedRelu,
    ScaledTanh,
    HardSigmoid,
    Elu,
    Softsign,
    Softplus,
}

impl ActKind {
    /// The function named `name` (case-insensitive, as onnxruntime reads them), with
    /// its default (alpha, beta) and how many of them it takes.
    fn parse(name: &str) -> Option<(ActKind, f32, f32, usize)> {
        Some(match name.to_ascii_lowercase().as_str() {
            "relu" => (ActKind::Relu, 0.0, 0.0, 0),
            "tanh" => (ActKind::Tanh, 0.0, 0.0, 0),
            "sigmoid" => (ActKind::Sigmoid, 0.0, 0.0, 0),
            "affine" => (ActKind::Affine, 1.0, 0.0, 2),
            "leakyrelu" => (ActKind::LeakyRelu, 0.01, 0.0, 1),
            "thresholdedrelu" => (ActKind::ThresholdedRelu, 1.0, 0.0, 1),
            "scaledtanh" => (ActKind::ScaledTanh, 1.0, 1.0, 2),
            "hardsigmoid" => (ActKind::HardSigmoid, 0.2, 0.5, 2),
            "elu" => (ActKind::Elu, 1.0, 0.0, 1),
            "softsign" => (ActKind::Softsign, 0.0, 0.0, 0),
            "softplus" => (ActKind::Softplus, 0.0, 0.0, 0),
            _ => return None,
        })
    }
}

impl Activation {
    fn apply(self, x: f32) -> f32 {
        let (a, b) = (self.alpha, self.beta);
        match self.kind {
            ActKind::Relu => x.max(0.0),
            ActKind::Tanh => x.tanh(),
            ActKind::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            ActKind::Affine => a * x + b,
            ActKind::LeakyRelu => {
                if x >= 0.0 {
                    x
                } else {
                    a * x
                }
            }
            ActKind::ThresholdedRelu => {
                if x > a {
                    x
                } else {
                    0.0
                }
            }
            ActKind::ScaledTanh => a * (b * x).tanh(),
            ActKind::HardSigmoid => (a * x + b).clamp(0.0, 1.0),
            ActKind::Elu => {
                if x >= 0.0 {
                    x
                } else {
                    a * (x.exp() - 1.0)
                }
            }
            ActKind::Softsign => x / (1.0 + x.abs()),
            ActKind::Softplus => (1.0 + x.exp()).ln(),
        }
    }
}

/// The node's activation functions, `per_direction` of them for each of `directions`
/// (a list of one direction's functions serves both), alphas and betas taken in order
/// by the functions that have them.
fn activations(
    ctx: &OpCtx<'_>,
    cell: Cell,
    directions: usize,
) -> Result<Vec<Vec<Activation>>, ExecError> {
    let per_direction = cell.default_activations().len();
    let names: Vec<String> = match ctx.attr("activations") {
        Some(Attr::Strings(names)) => names.clone(),
        Some(_) => return Err(ctx.err("attribute `activations` must be a list of strings")),
        None => cell
            .default_activations()
            .iter()
            .map(|s| s.to_string())
            .collect(),
    };
    let names = if names.len() == per_direction && directions == 2 {
        [names.clone(), names].concat()
    } else {
        names
    };
    if names.len() != per_direction * directions {
        return Err(ctx.err(format!(
            "{} activation functions for {directions} direction(s) of {per_direction}",
            names.len()
        )));
    }
    let alphas = ctx.attr_floats("activation_alpha")?.unwrap_or_default();
    let betas = ctx.attr_floats("activation_beta")?.unwrap_or_default();
    let (mut next_alpha, mut next_beta) = (alphas.iter(), betas.iter());
    let mut all = Vec::with_capacity(names.len());
    for name in &names {
        let (kind, alpha, beta, params) = ActKind::parse(name)
            .ok_or_else(|| ctx.err(format!("unsupported activation function `{name}`")))?;
        let alpha = if params >= 1 {
            next_alpha.next().copied().unwrap_or(alpha)
        } else {
            alpha
        };
        let beta = if params >= 2 {
            next_beta.next().copied().unwrap_or(beta)
        } else {
            beta
        };
        all.push(Activation { kind, alpha, beta });
    }
    Ok(all.chunks(per_direction).map(<[_]>::to_vec).collect())
}

/// Shapes and options of one evaluation.
struct Dims {
    batch: usize,
    hidden: usize,
    directions: usize,
    gates: usize,
}

/// Where direction `dir`'s state of batch entry `b` starts in a `[directions, batch,
/// hidden]` tensor (`[batch, directions, hidden]` in layout 1).
fn state_offset(d: &Dims, dir: usize, b: usize, batch_major: bool) -> usize {
    if batch_major {
        (b * d.directions + dir) * d.hidden
    } else {
        (dir * d.batch + b) * d.hidden
    }
}

/// An optional `[directions, batch, hidden]` state input (`[batch, directions, hidden]`
/// in layout 1), as `[directions][batch * hidden]`.
fn state_input(
    ctx: &OpCtx<'_>,
    slot: usize,
    d: &Dims,
    batch_major: bool,
) -> Result<Vec<Vec<f32>>, ExecError> {
    let mut states = vec![vec![0.0f32; d.batch * d.hidden]; d.directions];
    let Some(values) = ctx.opt_float_input(slot)? else {
        return Ok(states);
    };
    if values.len() != d.directions * d.batch * d.hidden {
        return Err(ctx.err(format!(
            "input {slot} has {} values, expected {} x {} x {}",
            values.len(),
            d.directions,
            d.batch,
            d.hidden
        )));
    }
    for (dir, state) in states.iter_mut().enumerate() {
        for b in 0..d.batch {
            let at = state_offset(d, dir, b, batch_major);
            state[b * d.hidden..][..d.hidden].copy_from_slice(&values[at..][..d.hidden]);
        }
    }
    Ok(states)
}

fn recurrent(ctx: &OpCtx<'_>, cell: Cell) -> Result<Vec<Tensor>, ExecError> {
    let x_t = ctx.input(0)?;
    let dtype = ctx.float_dtype(0)?;
    let batch_major = ctx.attr_int("layout", 0)? != 0;
    let w_t = ctx.input(1)?;
    let r_t = ctx.input(2)?;
    let (&[s0, s1, input], &[directions, gh, w_in], &[r_dirs, r_gh, r_hidden]) =
        (x_t.shape(), w_t.shape(), r_t.shape())
    else {
        return Err(ctx.err("X, W and R must be 3-D"));
    };
    let (seq, batch) = if batch_major { (s1, s0) } else { (s0, s1) };
    let gates = cell.gates();
    let hidden = match ctx.attr_int("hidden_size", 0)? {
        0 => r_hidden,
        h => usize::try_from(h).map_err(|_| ctx.err("hidden_size is negative"))?,
    };
    let wanted_dirs = match ctx.attr_str("direction", "forward")? {
        "forward" | "reverse" => 1,
        "bidirectional" => 2,
        other => return Err(ctx.err(format!("unknown direction `{other}`"))),
    };
    if directions != wanted_dirs
        || r_dirs != directions
        || gh != gates * hidden
        || r_gh != gates * hidden
        || w_in != input
        || r_hidden != hidden
    {
        return Err(ctx.err(format!(
            "W {:?} / R {:?} do not fit X {:?} with hidden_size {hidden}, {wanted_dirs} \
             direction(s) and {gates} gate(s)",
            w_t.shape(),
            r_t.shape(),
            x_t.shape()
        )));
    }
    let d = Dims {
        batch,
        hidden,
        directions,
        gates,
    };
    let reverse_only = ctx.attr_str("direction", "forward")? == "reverse";
    let acts = activations(ctx, cell, directions)?;
    let clip = ctx
        .attr("clip")
        .map(|_| ctx.attr_float("clip", 0.0))
        .transpose()?;
    let input_forget = cell == Cell::Lstm && ctx.attr_int("input_forget", 0)? != 0;
    let linear_before_reset = cell == Cell::Gru && ctx.attr_int("linear_before_reset", 0)? != 0;
    let lens = match ctx.opt_ints_input(4)? {
        Some(lens) if lens.len() != batch => {
            return Err(ctx.err(format!(
                "sequence_lens has {} entries for batch {batch}",
                lens.len()
            )))
        }
        Some(lens) => lens
            .iter()
            .map(|&l| usize::try_from(l).ok().filter(|&l| l <= seq))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| ctx.err(format!("sequence_lens {lens:?} outside 0..={seq}")))?,
        None => vec![seq; batch],
    };
    // X as time-major [seq * batch, input].
    let x = ctx.float_input(0)?;
    let x: Vec<f32> = if batch_major {
        let mut t = vec![0.0f32; x.len()];
        for b in 0..batch {
            for s in 0..seq {
                t[(s * batch + b) * input..][..input]
                    .copy_from_slice(&x[(b * seq + s) * input..][..input]);
            }
        }
        t
    } else {
        x.into_owned()
    };
    let w = ctx.float_input(1)?;
    let r = ctx.float_input(2)?;
    let bias = ctx.opt_float_input(3)?;
    if bias
        .as_ref()
        .is_some_and(|b| b.len() != directions * 2 * gates * hidden)
    {
        return Err(ctx.err("B must be [num_directions, 2 * gates * hidden_size]"));
    }
    let peep = if cell == Cell::Lstm {
        ctx.opt_float_input(7)?
    } else {
        None
    };
    if peep
        .as_ref()
        .is_some_and(|p| p.len() != directions * 3 * hidden)
    {
        return Err(ctx.err("P must be [num_directions, 3 * hidden_size]"));
    }
    let mut h_state = state_input(ctx, 5, &d, batch_major)?;
    let mut c_state = if cell == Cell::Lstm {
        state_input(ctx, 6, &d, batch_major)?
    } else {
        Vec::new()
    };
    let mut y = vec![0.0f32; seq * directions * batch * hidden];
    for dir in 0..directions {
        let reverse = reverse_only || dir == 1;
        let w_d = &w[dir * gh * input..][..gh * input];
        let r_d = &r[dir * gh * hidden..][..gh * hidden];
        let b_d = bias.as_ref().map(|b| &b[dir * 2 * gh..][..2 * gh]);
        let p_d = peep.as_ref().map(|p| &p[dir * 3 * hidden..][..3 * hidden]);
        // Input projection of every step: [seq * batch, gates * hidden].
        let mut xw = vec![0.0f32; seq * batch * gh];
        sgemm(
            1.0,
            Mat::row_major(&x, seq * batch, input),
            Mat::row_major(w_d, gh, input).t(),
            0.0,
            &mut xw,
            gh,
        );
        if let Some(b) = b_d {
            // Wb always; Rb too, except GRU's h gate with linear_before_reset.
            let folded: Vec<f32> = (0..gh)
                .map(|j| {
                    let rb = if linear_before_reset && j >= 2 * hidden {
                        0.0
                    } else {
                        b[gh + j]
                    };
                    b[j] + rb
                })
                .collect();
            for row in xw.chunks_mut(gh) {
                row.iter_mut().zip(&folded).for_each(|(v, b)| *v += b);
            }
        }
        let step = Step {
            cell,
            d: &d,
            acts: &acts[dir],
            clip,
            input_forget,
            linear_before_reset,
            r: r_d,
            rb_h: b_d
                .filter(|_| cell == Cell::Gru)
                .map(|b| &b[gh + 2 * hidden..][..hidden]),
            peep: p_d,
        };
        let order: Box<dyn Iterator<Item = usize>> = if reverse {
            Box::new((0..seq).rev())
        } else {
            Box::new(0..seq)
        };
        for t in order {
            let active: Vec<bool> = lens.iter().map(|&l| t < l).collect();
            let c = c_state.get_mut(dir).map(Vec::as_mut_slice);
            step.run(
                &xw[t * batch * gh..][..batch * gh],
                &mut h_state[dir],
                c,
                &active,
            );
            for b in (0..batch).filter(|&b| active[b]) {
                let at = ((t * directions + dir) * batch + b) * hidden;
                y[at..at + hidden].copy_from_slice(&h_state[dir][b * hidden..][..hidden]);
            }
        }
    }
    // A batch entry of length 0 ends with zero states (as onnxruntime has it).
    for (b, _) in lens.iter().enumerate().filter(|(_, &l)| l == 0) {
        for state in h_state.iter_mut().chain(c_state.iter_mut()) {
            state[b * hidden..][..hidden].fill(0.0);
        }
    }
    let mut outputs = Vec::new();
    let (y_shape, y) = if batch_major {
        // [seq, dirs, batch, hidden] -> [batch, seq, dirs, hidden].
        let mut t = vec![0.0f32; y.len()];
        for s in 0..seq {
            for dir in 0..directions {
                for b in 0..batch {
                    t[((b * seq + s) * directions + dir) * hidden..][..hidden].copy_from_slice(
                        &y[((s * directions + dir) * batch + b) * hidden..][..hidden],
                    );
                }
            }
        }
        (vec![batch, seq, directions, hidden], t)
    } else {
        (vec![seq, directions, batch, hidden], y)
    };
    outputs.push(tensor_from_f32(dtype, y_shape, y));
    outputs.push(final_state(&h_state, &d, batch_major, dtype));
    if cell == Cell::Lstm {
        outputs.push(final_state(&c_state, &d, batch_major, dtype));
    }
    Ok(outputs)
}

/// `[directions][batch * hidden]` as the `Y_h` / `Y_c` output.
fn final_state(states: &[Vec<f32>], d: &Dims, batch_major: bool, dtype: rtq_ir::DType) -> Tensor {
    let mut out = vec![0.0f32; d.directions * d.batch * d.hidden];
    for (dir, state) in states.iter().enumerate() {
        for b in 0..d.batch {
            let at = state_offset(d, dir, b, batch_major);
            out[at..at + d.hidden].copy_from_slice(&state[b * d.hidden..][..d.hidden]);
        }
    }
    let shape = if batch_major {
        vec![d.batch, d.directions, d.hidden]
    } else {
        vec![d.directions, d.batch, d.hidden]
    };
    tensor_from_f32(dtype, shape, out)
}

/// One direction's step function.
struct Step<'a> {
    cell: Cell,
    d: &'a Dims,
    acts: &'a [Activation],
    clip: Option<f32>,
    input_forget: bool,
    linear_before_reset: bool,
    /// R of this direction, `[gates * hidden, hidden]`.
    r: &'a [f32],
    /// GRU's `Rb` of the h gate (added inside the reset with `linear_before_reset`).
    rb_h: Option<&'a [f32]>,
    /// LSTM peepholes `i o f`.
    peep: Option<&'a [f32]>,
}

impl Step<'_> {
    fn clipped(&self, v: f32) -> f32 {
        match self.clip {
            Some(c) => v.clamp(-c, c),
            None => v,
        }
    }

    /// Advances the state of the `active` batch entries by one step, `xw` being the
    /// step's input projection `[batch, gates * hidden]` (biases included).
    fn run(&self, xw: &[f32], h: &mut [f32], c: Option<&mut [f32]>, active: &[bool]) {
        let (batch, hidden) = (self.d.batch, self.d.hidden);
        let gh = self.d.gates * hidden;
        let mut hr = vec![0.0f32; batch * gh];
        sgemm(
            1.0,
            Mat::row_major(h, batch, hidden),
            Mat::row_major(self.r, gh, hidden).t(),
            0.0,
            &mut hr,
            gh,
        );
        match self.cell {
            Cell::Rnn => {
                for b in (0..batch).filter(|&b| active[b]) {
                    for j in 0..hidden {
                        let v = xw[b * gh + j] + hr[b * gh + j];
                        h[b * hidden + j] = self.acts[0].apply(self.clipped(v));
                    }
                }
            }
            Cell::Gru => self.gru(xw, &hr, h, active),
            Cell::Lstm => self.lstm(xw, &hr, h, c.expect("LSTM has a cell state"), active),
        }
    }

    fn gru(&self, xw: &[f32], hr: &[f32], h: &mut [f32], active: &[bool]) {
        let (batch, hidden) = (self.d.batch, self.d.hidden);
        let gh = 3 * hidden;
        let (f, g) = (self.acts[0], self.acts[1]);
        // Reset gate and (for the default form) r (.) H, projected by Rh.
        let mut z = vec![0.0f32; batch * hidden];
        let mut rh = vec![0.0f32; batch * hidden];
        let mut rg = vec![0.0f32; batch * hidden];
        for b in 0..batch {
            for j in 0..hidden {
                let at = b * gh;
                z[b * hidden + j] = f.apply(self.clipped(xw[at + j] + hr[at + j]));
                let r = f.apply(self.clipped(xw[at + hidden + j] + hr[at + hidden + j]));
                rg[b * hidden + j] = r;
                rh[b * hidden + j] = r * h[b * hidden + j];
            }
        }
        let candidate_recurrence: Vec<f32> = if self.linear_before_reset {
            (0..batch * hidden)
                .map(|i| {
                    let (b, j) = (i / hidden, i % hidden);
                    let rb = self.rb_h.map_or(0.0, |rb| rb[j]);
                    rg[i] * (hr[b * gh + 2 * hidden + j] + rb)
                })
                .collect()
        } else {
            let mut out = vec![0.0f32; batch * hidden];
            sgemm(
                1.0,
                Mat::row_major(&rh, batch, hidden),
                Mat::row_major(&self.r[2 * hidden * hidden..], hidden, hidden).t(),
                0.0,
                &mut out,
                hidden,
            );
            out
        };
        for b in (0..batch).filter(|&b| active[b]) {
            for j in 0..hidden {
                let i = b * hidden + j;
                let cand =
                    g.apply(self.clipped(xw[b * gh + 2 * hidden + j] + candidate_recurrence[i]));
                h[i] = (1.0 - z[i]) * cand + z[i] * h[i];
            }
        }
    }

    fn lstm(&self, xw: &[f32], hr: &[f32], h: &mut [f32], c: &mut [f32], active: &[bool]) {
        let (batch, hidden) = (self.d.batch, self.d.hidden);
        let gh = 4 * hidden;
        let (f, g, hact) = (self.acts[0], self.acts[1], self.acts[2]);
        let peep = |k: usize, j: usize| self.peep.map_or(0.0, |p| p[k * hidden + j]);
        for b in (0..batch).filter(|&b| active[b]) {
            for j in 0..hidden {
                let at = b * gh;
                let pre = |gate: usize| xw[at + gate * hidden + j] + hr[at + gate * hidden + j];
                let i_state = b * hidden + j;
                let c_prev = c[i_state];
                let i = f.apply(self.clipped(pre(0) + peep(0, j) * c_prev));
                let forget = if self.input_forget {
                    1.0 - i
                } else {
                    f.apply(self.clipped(pre(2) + peep(2, j) * c_prev))
                };
                let cand = g.apply(self.clipped(pre(3)));
                let c_new = forget * c_prev + i * cand;
                let o = f.apply(self.clipped(pre(1) + peep(1, j) * c_new));
                c[i_state] = c_new;
                h[i_state] = o * hact.apply(c_new);
            }
        }
    }
}

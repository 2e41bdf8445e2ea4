/*
 * rtq_trt.h: rtq's C interface to TensorRT.
 *
 * A small, pure C layer over TensorRT's C++ API (TensorRT 10 and 11) so Rust
 * binds to stable, versioned-by-us types instead of C++ classes:
 *
 *   - every handle is opaque and owned by the caller, released by its
 *     `_destroy` function (NULL is accepted and ignored);
 *   - every fallible function returns an `rtq_trt_status`; on failure the
 *     message is kept per thread and read with `rtq_trt_last_error`;
 *   - no C++ exception crosses this interface;
 *   - TensorRT enums are translated to the enums below, whose values never
 *     change, whatever TensorRT version the shim was compiled against.
 *
 * The shim must be called with a CUDA context current on the calling thread
 * (the device's primary context, as the CUDA runtime and cudarc use).
 */
#ifndef RTQ_TRT_H
#define RTQ_TRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Most dimensions a tensor shape may have (TensorRT's Dims::MAX_DIMS). */
#define RTQ_TRT_MAX_DIMS 8

/** Outcome of a shim call. */
typedef enum rtq_trt_status {
    /** Success. */
    RTQ_TRT_OK = 0,
    /** A NULL pointer, bad size or malformed option was passed. */
    RTQ_TRT_ERR_INVALID_ARGUMENT = 1,
    /** The request needs a feature the linked TensorRT version lacks. */
    RTQ_TRT_ERR_UNSUPPORTED = 2,
    /** The ONNX parser rejected the model. */
    RTQ_TRT_ERR_PARSE = 3,
    /** The builder failed to build an engine. */
    RTQ_TRT_ERR_BUILD = 4,
    /** A serialized engine (plan) could not be deserialized. */
    RTQ_TRT_ERR_DESERIALIZE = 5,
    /** No I/O tensor or optimization profile has the given name or index. */
    RTQ_TRT_ERR_NOT_FOUND = 6,
    /** Setting shapes/addresses or enqueueing inference failed. */
    RTQ_TRT_ERR_EXECUTION = 7,
    /** Host or device memory ran out. */
    RTQ_TRT_ERR_OUT_OF_MEMORY = 8,
    /** An unexpected C++ exception or internal inconsistency. */
    RTQ_TRT_ERR_INTERNAL = 9
} rtq_trt_status;

/** Element type of a tensor (stable values, independent of TensorRT's). */
typedef enum rtq_trt_dtype {
    /** A type this shim does not know (newer TensorRT). */
    RTQ_TRT_DTYPE_UNKNOWN = 0,
    /** 32-bit IEEE float. */
    RTQ_TRT_DTYPE_FLOAT = 1,
    /** 16-bit IEEE float. */
    RTQ_TRT_DTYPE_HALF = 2,
    /** bfloat16. */
    RTQ_TRT_DTYPE_BF16 = 3,
    /** Signed 8-bit integer (quantized values). */
    RTQ_TRT_DTYPE_INT8 = 4,
    /** Unsigned 8-bit integer. */
    RTQ_TRT_DTYPE_UINT8 = 5,
    /** Signed 32-bit integer. */
    RTQ_TRT_DTYPE_INT32 = 6,
    /** Signed 64-bit integer. */
    RTQ_TRT_DTYPE_INT64 = 7,
    /** Boolean, one byte per element. */
    RTQ_TRT_DTYPE_BOOL = 8,
    /** 8-bit float, E4M3. */
    RTQ_TRT_DTYPE_FP8 = 9,
    /** Signed 4-bit integer, two per byte. */
    RTQ_TRT_DTYPE_INT4 = 10,
    /** 4-bit float, E2M1, two per byte. */
    RTQ_TRT_DTYPE_FP4 = 11,
    /** 8-bit exponent-only scale type (E8M0). */
    RTQ_TRT_DTYPE_E8M0 = 12
} rtq_trt_dtype;

/** Whether an engine tensor is an input or an output. */
typedef enum rtq_trt_io_mode {
    /** Neither (not an I/O tensor). */
    RTQ_TRT_IO_NONE = 0,
    /** An engine input. */
    RTQ_TRT_IO_INPUT = 1,
    /** An engine output. */
    RTQ_TRT_IO_OUTPUT = 2
} rtq_trt_io_mode;

/** Where TensorRT expects an I/O tensor's memory. */
typedef enum rtq_trt_location {
    /** Device memory (execution tensors). */
    RTQ_TRT_LOCATION_DEVICE = 0,
    /** Host memory (shape tensors). */
    RTQ_TRT_LOCATION_HOST = 1
} rtq_trt_location;

/** Severity of a TensorRT log message (TensorRT's own order). */
typedef enum rtq_trt_severity {
    /** Unrecoverable internal error. */
    RTQ_TRT_SEVERITY_INTERNAL_ERROR = 0,
    /** Application error. */
    RTQ_TRT_SEVERITY_ERROR = 1,
    /** Recovered problem. */
    RTQ_TRT_SEVERITY_WARNING = 2,
    /** Informational message. */
    RTQ_TRT_SEVERITY_INFO = 3,
    /** Debugging detail. */
    RTQ_TRT_SEVERITY_VERBOSE = 4
} rtq_trt_severity;

/** Which shape of an optimization profile. */
typedef enum rtq_trt_profile_selector {
    /** Smallest shape the profile accepts. */
    RTQ_TRT_PROFILE_MIN = 0,
    /** Shape the kernels are tuned for. */
    RTQ_TRT_PROFILE_OPT = 1,
    /** Largest shape the profile accepts. */
    RTQ_TRT_PROFILE_MAX = 2
} rtq_trt_profile_selector;

/** A tensor shape; -1 marks a dynamic dimension. */
typedef struct rtq_trt_dims {
    /** Number of dimensions used in `d` (0..=RTQ_TRT_MAX_DIMS). */
    int32_t nb_dims;
    /** The extents. */
    int64_t d[RTQ_TRT_MAX_DIMS];
} rtq_trt_dims;

/** The min/opt/max shapes of one network input in the optimization profile. */
typedef struct rtq_trt_input_profile {
    /** Input tensor name (NUL-terminated). */
    const char *name;
    /** Smallest accepted shape. */
    rtq_trt_dims min;
    /** Shape to tune for. */
    rtq_trt_dims opt;
    /** Largest accepted shape. */
    rtq_trt_dims max;
} rtq_trt_input_profile;

/** Options of `rtq_trt_build_engine`. Zero-initialise, then set what you need. */
typedef struct rtq_trt_build_options {
    /** Workspace memory pool limit in bytes; 0 keeps TensorRT's default. */
    uint64_t workspace_bytes;
    /**
     * Nonzero: build a strongly typed network (types come from the ONNX
     * model, as Q/DQ models need). TensorRT 11 networks are always strongly
     * typed, so zero there is RTQ_TRT_ERR_UNSUPPORTED.
     */
    int32_t strongly_typed;
    /** Weakly typed builds only (TensorRT 10): allow FP16 kernels. */
    int32_t fp16;
    /** Weakly typed builds only (TensorRT 10): allow INT8 kernels. */
    int32_t int8;
    /** Builder optimization level 0..=5; negative keeps TensorRT's default. */
    int32_t builder_optimization_level;
    /** One profile entry per dynamic input (may be NULL when nb_profiles == 0). */
    const rtq_trt_input_profile *profiles;
    /** Number of entries in `profiles`. */
    size_t nb_profiles;
    /** Serialized timing cache to start from (may be NULL). */
    const void *timing_cache;
    /** Bytes at `timing_cache`. */
    size_t timing_cache_size;
    /** Path of the ONNX file, to locate external weights (may be NULL). */
    const char *model_path;
} rtq_trt_build_options;

/** Description of one engine I/O tensor. */
typedef struct rtq_trt_tensor_desc {
    /** Tensor name, owned by the engine (valid while the engine lives). */
    const char *name;
    /** An `rtq_trt_io_mode`. */
    int32_t io_mode;
    /** An `rtq_trt_dtype`. */
    int32_t dtype;
    /** An `rtq_trt_location`. */
    int32_t location;
    /** Shape as built; -1 for dynamic dimensions. */
    rtq_trt_dims shape;
} rtq_trt_tensor_desc;

/** A builder plus its logger. */
typedef struct rtq_trt_builder rtq_trt_builder;
/** A deserialized engine plus the runtime and logger that own it. */
typedef struct rtq_trt_engine rtq_trt_engine;
/** An execution context of an engine. */
typedef struct rtq_trt_context rtq_trt_context;
/** Bytes produced by TensorRT (a serialized plan or timing cache). */
typedef struct rtq_trt_blob rtq_trt_blob;

/** Version of the linked TensorRT library, major*10000 + minor*100 + patch. */
int32_t rtq_trt_library_version(void);

/** Version of the TensorRT headers the shim was compiled against, same encoding. */
int32_t rtq_trt_header_version(void);

/**
 * Copies the calling thread's last error message into `buf` (NUL-terminated,
 * truncated to `buf_size` - 1 bytes) and returns the message's full length
 * without the NUL. `buf` may be NULL when `buf_size` is 0, to query the length.
 */
size_t rtq_trt_last_error(char *buf, size_t buf_size);

/**
 * Creates a builder whose logger keeps messages of `min_severity` (an
 * `rtq_trt_severity`) and more severe.
 */
rtq_trt_status rtq_trt_builder_create(int32_t min_severity, rtq_trt_builder **out);

/** Destroys a builder. */
void rtq_trt_builder_destroy(rtq_trt_builder *builder);

/**
 * Copies the messages the builder's logger kept so far, one per line with a
 * severity tag, like `rtq_trt_last_error`.
 */
size_t rtq_trt_builder_log(const rtq_trt_builder *builder, char *buf, size_t buf_size);

/**
 * Parses `onnx_size` bytes of an ONNX model and builds a serialized engine.
 * On success `*plan_out` holds the plan; when `timing_cache_out` is not NULL
 * it receives the updated serialized timing cache.
 */
rtq_trt_status rtq_trt_build_engine(rtq_trt_builder *builder,
                                    const void *onnx,
                                    size_t onnx_size,
                                    const rtq_trt_build_options *options,
                                    rtq_trt_blob **plan_out,
                                    rtq_trt_blob **timing_cache_out);

/** Start of a blob's bytes. */
const void *rtq_trt_blob_data(const rtq_trt_blob *blob);

/** Number of bytes in a blob. */
size_t rtq_trt_blob_size(const rtq_trt_blob *blob);

/** Destroys a blob. */
void rtq_trt_blob_destroy(rtq_trt_blob *blob);

/** Deserializes `plan_size` bytes of a serialized engine (plan). */
rtq_trt_status rtq_trt_engine_deserialize(const void *plan,
                                          size_t plan_size,
                                          rtq_trt_engine **out);

/** Destroys an engine; its contexts must have been destroyed first. */
void rtq_trt_engine_destroy(rtq_trt_engine *engine);

/** Number of I/O tensors of the engine (inputs and outputs). */
int32_t rtq_trt_engine_num_io_tensors(const rtq_trt_engine *engine);

/** Describes I/O tensor `index` (0 <= index < rtq_trt_engine_num_io_tensors). */
rtq_trt_status rtq_trt_engine_io_tensor(const rtq_trt_engine *engine,
                                        int32_t index,
                                        rtq_trt_tensor_desc *out);

/** Number of optimization profiles the engine was built with. */
int32_t rtq_trt_engine_num_profiles(const rtq_trt_engine *engine);

/**
 * One shape (`selector`, an `rtq_trt_profile_selector`) of input `name` in
 * optimization profile `profile`.
 */
rtq_trt_status rtq_trt_engine_profile_shape(const rtq_trt_engine *engine,
                                            const char *name,
                                            int32_t profile,
                                            int32_t selector,
                                            rtq_trt_dims *out);

/** Creates an execution context (optimization profile 0). */
rtq_trt_status rtq_trt_context_create(rtq_trt_engine *engine, rtq_trt_context **out);

/** Destroys an execution context. */
void rtq_trt_context_destroy(rtq_trt_context *context);

/** Sets the run-time shape of input `name`. */
rtq_trt_status rtq_trt_context_set_input_shape(rtq_trt_context *context,
                                               const char *name,
                                               const rtq_trt_dims *dims);

/**
 * The shape of I/O tensor `name` given the input shapes set so far; -1 marks
 * dimensions not yet known (missing input shapes or data-dependent outputs).
 */
rtq_trt_status rtq_trt_context_tensor_shape(const rtq_trt_context *context,
                                            const char *name,
                                            rtq_trt_dims *out);

/** Binds I/O tensor `name` to `address` (device memory, or host memory for shape tensors). */
rtq_trt_status rtq_trt_context_set_tensor_address(rtq_trt_context *context,
                                                  const char *name,
                                                  void *address);

/** Enqueues one inference on `cuda_stream` (a cudaStream_t / CUstream). */
rtq_trt_status rtq_trt_context_enqueue(rtq_trt_context *context, void *cuda_stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RTQ_TRT_H */

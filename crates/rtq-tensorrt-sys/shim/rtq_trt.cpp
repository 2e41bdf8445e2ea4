// rtq_trt.cpp: implementation of rtq_trt.h over TensorRT's C++ API.
//
// Supports TensorRT 10.x and 11.x; what differs between them is decided at
// compile time from NV_TENSORRT_MAJOR/NV_TENSORRT_MINOR (NvInferVersion.h):
//   - TensorRT 10: strongly typed networks need NetworkDefinitionCreationFlag::kSTRONGLY_TYPED;
//     weakly typed builds may set BuilderFlag::kFP16 / kINT8.
//   - TensorRT 11: every network is strongly typed (the flag is deprecated and ignored)
//     and the FP16/INT8 builder flags are gone.
// Every exported function catches all C++ exceptions and reports them through
// the thread-local last-error message.

#include "rtq_trt.h"

#include <NvInfer.h>
#include <NvInferVersion.h>
#include <NvOnnxParser.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#if !defined(NV_TENSORRT_MAJOR) || NV_TENSORRT_MAJOR < 10
#error "rtq_trt needs TensorRT 10 or newer: NvInferVersion.h reports an older NV_TENSORRT_MAJOR"
#endif

// Weakly typed networks and the FP16/INT8 builder flags exist up to TensorRT 10.
#define RTQ_TRT_HAS_WEAK_TYPING (NV_TENSORRT_MAJOR < 11)
// DataType::kFP4 appeared in 10.8, DataType::kE8M0 in 10.12.
#define RTQ_TRT_HAS_FP4 (NV_TENSORRT_MAJOR > 10 || NV_TENSORRT_MINOR >= 8)
#define RTQ_TRT_HAS_E8M0 (NV_TENSORRT_MAJOR > 10 || NV_TENSORRT_MINOR >= 12)

#if defined(__GNUC__) || defined(__clang__)
#define RTQ_TRT_ALLOW_DEPRECATED_BEGIN \
    _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wdeprecated-declarations\"")
#define RTQ_TRT_ALLOW_DEPRECATED_END _Pragma("GCC diagnostic pop")
#elif defined(_MSC_VER)
#define RTQ_TRT_ALLOW_DEPRECATED_BEGIN __pragma(warning(push)) __pragma(warning(disable : 4996))
#define RTQ_TRT_ALLOW_DEPRECATED_END __pragma(warning(pop))
#else
#define RTQ_TRT_ALLOW_DEPRECATED_BEGIN
#define RTQ_TRT_ALLOW_DEPRECATED_END
#endif

namespace {

using nvinfer1::Dims;
using Severity = nvinfer1::ILogger::Severity;

thread_local std::string t_last_error;

// Records `message` as the calling thread's last error; never throws.
rtq_trt_status fail(rtq_trt_status status, const std::string& message) noexcept {
    try {
        t_last_error = message;
    } catch (...) {
        t_last_error.clear();
    }
    return status;
}

rtq_trt_status fail(rtq_trt_status status, const char* a, const char* b, const char* c = "") noexcept {
    try {
        t_last_error.assign(a).append(b).append(c);
    } catch (...) {
        t_last_error.clear();
    }
    return status;
}

size_t copy_out(const std::string& text, char* buf, size_t buf_size) noexcept {
    if (buf != nullptr && buf_size > 0) {
        const size_t n = text.size() < buf_size - 1 ? text.size() : buf_size - 1;
        std::memcpy(buf, text.data(), n);
        buf[n] = '\0';
    }
    return text.size();
}

const char* severity_tag(Severity severity) noexcept {
    switch (severity) {
    case Severity::kINTERNAL_ERROR: return "[F] ";
    case Severity::kERROR: return "[E] ";
    case Severity::kWARNING: return "[W] ";
    case Severity::kINFO: return "[I] ";
    case Severity::kVERBOSE: return "[V] ";
    }
    return "[?] ";
}

// Collects TensorRT's log messages. Errors are always kept; other messages
// only at or above the configured severity. Thread safe, as TensorRT requires.
class Logger final : public nvinfer1::ILogger {
public:
    explicit Logger(Severity min_severity) noexcept : min_severity_(min_severity) {}

    void log(Severity severity, const char* msg) noexcept override {
        const bool is_error = static_cast<int32_t>(severity) <= static_cast<int32_t>(Severity::kERROR);
        if (!is_error && static_cast<int32_t>(severity) > static_cast<int32_t>(min_severity_)) {
            return;
        }
        try {
            std::lock_guard<std::mutex> lock(mutex_);
            if (entries_.size() >= kMaxEntries) {
                entries_.erase(entries_.begin(), entries_.begin() + kMaxEntries / 2);
                dropped_ += kMaxEntries / 2;
            }
            entries_.push_back(Entry{severity, msg != nullptr ? msg : ""});
        } catch (...) {
            // Logging must never throw into TensorRT; a lost message is acceptable.
        }
    }

    // A position in the log; messages logged later are "since" it.
    size_t mark() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return dropped_ + entries_.size();
    }

    // The error messages logged since `mark`, each prefixed with "\n  ".
    std::string errors_since(size_t mark) const {
        std::lock_guard<std::mutex> lock(mutex_);
        std::string out;
        const size_t first = mark > dropped_ ? mark - dropped_ : 0;
        for (size_t i = first; i < entries_.size(); ++i) {
            if (static_cast<int32_t>(entries_[i].severity) <= static_cast<int32_t>(Severity::kERROR)) {
                out.append("\n  ").append(entries_[i].message);
            }
        }
        return out;
    }

    // Every kept message, one per line with a severity tag.
    std::string dump() const {
        std::lock_guard<std::mutex> lock(mutex_);
        std::string out;
        for (const Entry& e : entries_) {
            out.append(severity_tag(e.severity)).append(e.message).append("\n");
        }
        return out;
    }

    // Adds a message of rtq's own (e.g. a fallback it took).
    void note(Severity severity, const std::string& message) noexcept { log(severity, message.c_str()); }

private:
    struct Entry {
        Severity severity;
        std::string message;
    };
    static constexpr size_t kMaxEntries = 20000;
    mutable std::mutex mutex_;
    Severity min_severity_;
    std::vector<Entry> entries_;
    size_t dropped_ = 0;
};

Severity to_severity(int32_t value) noexcept {
    if (value <= 0) return Severity::kINTERNAL_ERROR;
    if (value >= 4) return Severity::kVERBOSE;
    return static_cast<Severity>(value);
}

std::string dims_to_string(const Dims& dims) {
    std::string out = "[";
    for (int32_t i = 0; i < dims.nbDims; ++i) {
        if (i > 0) out += ",";
        out += std::to_string(static_cast<long long>(dims.d[i]));
    }
    return out + "]";
}

bool to_trt_dims(const rtq_trt_dims& in, Dims& out) noexcept {
    if (in.nb_dims < 0 || in.nb_dims > RTQ_TRT_MAX_DIMS || in.nb_dims > Dims::MAX_DIMS) {
        return false;
    }
    out = Dims{};
    out.nbDims = in.nb_dims;
    for (int32_t i = 0; i < in.nb_dims; ++i) {
        out.d[i] = in.d[i];
    }
    return true;
}

// Converts TensorRT dims; false when TensorRT signalled an invalid query (nbDims < 0).
bool from_trt_dims(const Dims& in, rtq_trt_dims& out) noexcept {
    out = rtq_trt_dims{};
    if (in.nbDims < 0 || in.nbDims > RTQ_TRT_MAX_DIMS) {
        return false;
    }
    out.nb_dims = in.nbDims;
    for (int32_t i = 0; i < in.nbDims; ++i) {
        out.d[i] = static_cast<int64_t>(in.d[i]);
    }
    return true;
}

rtq_trt_dtype to_dtype(nvinfer1::DataType type) noexcept {
    switch (type) {
    case nvinfer1::DataType::kFLOAT: return RTQ_TRT_DTYPE_FLOAT;
    case nvinfer1::DataType::kHALF: return RTQ_TRT_DTYPE_HALF;
    case nvinfer1::DataType::kBF16: return RTQ_TRT_DTYPE_BF16;
    case nvinfer1::DataType::kINT8: return RTQ_TRT_DTYPE_INT8;
    case nvinfer1::DataType::kUINT8: return RTQ_TRT_DTYPE_UINT8;
    case nvinfer1::DataType::kINT32: return RTQ_TRT_DTYPE_INT32;
    case nvinfer1::DataType::kINT64: return RTQ_TRT_DTYPE_INT64;
    case nvinfer1::DataType::kBOOL: return RTQ_TRT_DTYPE_BOOL;
    case nvinfer1::DataType::kFP8: return RTQ_TRT_DTYPE_FP8;
    case nvinfer1::DataType::kINT4: return RTQ_TRT_DTYPE_INT4;
#if RTQ_TRT_HAS_FP4
    case nvinfer1::DataType::kFP4: return RTQ_TRT_DTYPE_FP4;
#endif
#if RTQ_TRT_HAS_E8M0
    case nvinfer1::DataType::kE8M0: return RTQ_TRT_DTYPE_E8M0;
#endif
    default: return RTQ_TRT_DTYPE_UNKNOWN;
    }
}

// Runs `body`, turning any escaping C++ exception into a status and message.
template <typename Body>
rtq_trt_status guarded(const char* what, Body&& body) noexcept {
    try {
        return body();
    } catch (const std::bad_alloc&) {
        return fail(RTQ_TRT_ERR_OUT_OF_MEMORY, what, ": out of host memory");
    } catch (const std::exception& e) {
        return fail(RTQ_TRT_ERR_INTERNAL, what, ": unexpected C++ exception: ", e.what());
    } catch (...) {
        return fail(RTQ_TRT_ERR_INTERNAL, what, ": unexpected non-standard C++ exception");
    }
}

} // namespace

// Handle definitions (declared opaque in rtq_trt.h). Members are destroyed in
// reverse order, so TensorRT objects go before the logger they log to.
struct rtq_trt_builder {
    explicit rtq_trt_builder(Severity min_severity) : logger(min_severity) {}
    Logger logger;
    std::unique_ptr<nvinfer1::IBuilder> builder;
};

struct rtq_trt_engine {
    rtq_trt_engine() : logger(Severity::kWARNING) {}
    Logger logger;
    std::unique_ptr<nvinfer1::IRuntime> runtime;
    std::unique_ptr<nvinfer1::ICudaEngine> engine;
};

struct rtq_trt_context {
    rtq_trt_engine* engine = nullptr;
    std::unique_ptr<nvinfer1::IExecutionContext> context;
};

struct rtq_trt_blob {
    std::unique_ptr<nvinfer1::IHostMemory> memory;
};

namespace {

// Names and shapes of the network inputs, for messages.
std::string describe_inputs(const nvinfer1::INetworkDefinition& network) {
    std::string out;
    for (int32_t i = 0; i < network.getNbInputs(); ++i) {
        const nvinfer1::ITensor* input = network.getInput(i);
        if (i > 0) out += ", ";
        out.append("`").append(input->getName()).append("` ").append(dims_to_string(input->getDimensions()));
    }
    return out.empty() ? std::string("none") : out;
}

const rtq_trt_input_profile* find_profile(const rtq_trt_build_options& options, const char* name) {
    for (size_t i = 0; i < options.nb_profiles; ++i) {
        if (options.profiles[i].name != nullptr && std::strcmp(options.profiles[i].name, name) == 0) {
            return &options.profiles[i];
        }
    }
    return nullptr;
}

// Checks the profile entries against the parsed network and adds them as optimization profile 0.
rtq_trt_status add_profile(rtq_trt_builder& b, nvinfer1::INetworkDefinition& network,
                           nvinfer1::IBuilderConfig& config, const rtq_trt_build_options& options) {
    for (size_t i = 0; i < options.nb_profiles; ++i) {
        const char* name = options.profiles[i].name;
        if (name == nullptr) {
            return fail(RTQ_TRT_ERR_INVALID_ARGUMENT, "shape profile entry has a NULL input name");
        }
        bool found = false;
        for (int32_t j = 0; j < network.getNbInputs() && !found; ++j) {
            found = std::strcmp(network.getInput(j)->getName(), name) == 0;
        }
        if (!found) {
            return fail(RTQ_TRT_ERR_NOT_FOUND, std::string("shapes were given for `") + name +
                                                   "`, which is not a network input (inputs: " +
                                                   describe_inputs(network) + ")");
        }
    }
    for (int32_t j = 0; j < network.getNbInputs(); ++j) {
        const nvinfer1::ITensor* input = network.getInput(j);
        const Dims dims = input->getDimensions();
        bool dynamic = false;
        for (int32_t k = 0; k < dims.nbDims; ++k) {
            dynamic = dynamic || dims.d[k] < 0;
        }
        if (input->isShapeTensor()) {
            return fail(RTQ_TRT_ERR_UNSUPPORTED, std::string("input `") + input->getName() +
                                                     "` is a shape tensor; rtq cannot set shape-tensor "
                                                     "profile values: make it a constant in the ONNX model");
        }
        if (dynamic && find_profile(options, input->getName()) == nullptr) {
            return fail(RTQ_TRT_ERR_INVALID_ARGUMENT, std::string("input `") + input->getName() +
                                                          "` has dynamic shape " + dims_to_string(dims) +
                                                          ": give its min/opt/max shapes");
        }
    }
    if (options.nb_profiles == 0) {
        return RTQ_TRT_OK;
    }
    nvinfer1::IOptimizationProfile* profile = b.builder->createOptimizationProfile();
    if (profile == nullptr) {
        return fail(RTQ_TRT_ERR_BUILD, "TensorRT could not create an optimization profile");
    }
    for (size_t i = 0; i < options.nb_profiles; ++i) {
        const rtq_trt_input_profile& p = options.profiles[i];
        Dims min{}, opt{}, max{};
        if (!to_trt_dims(p.min, min) || !to_trt_dims(p.opt, opt) || !to_trt_dims(p.max, max)) {
            return fail(RTQ_TRT_ERR_INVALID_ARGUMENT, std::string("input `") + p.name + "`: a profile shape has more than " +
                                                          std::to_string(RTQ_TRT_MAX_DIMS) + " dimensions");
        }
        const size_t mark = b.logger.mark();
        if (!profile->setDimensions(p.name, nvinfer1::OptProfileSelector::kMIN, min) ||
            !profile->setDimensions(p.name, nvinfer1::OptProfileSelector::kOPT, opt) ||
            !profile->setDimensions(p.name, nvinfer1::OptProfileSelector::kMAX, max)) {
            return fail(RTQ_TRT_ERR_INVALID_ARGUMENT, std::string("input `") + p.name + "`: TensorRT rejected min " +
                                                          dims_to_string(min) + " opt " + dims_to_string(opt) +
                                                          " max " + dims_to_string(max) + b.logger.errors_since(mark));
        }
    }
    const size_t mark = b.logger.mark();
    if (config.addOptimizationProfile(profile) < 0) {
        return fail(RTQ_TRT_ERR_INVALID_ARGUMENT,
                    std::string("TensorRT rejected the optimization profile") + b.logger.errors_since(mark));
    }
    return RTQ_TRT_OK;
}

rtq_trt_status build(rtq_trt_builder& b, const void* onnx, size_t onnx_size, const rtq_trt_build_options& options,
                     rtq_trt_blob** plan_out, rtq_trt_blob** timing_cache_out) {
    const size_t start_mark = b.logger.mark();

    nvinfer1::NetworkDefinitionCreationFlags flags = 0;
#if RTQ_TRT_HAS_WEAK_TYPING
    if (options.strongly_typed != 0) {
        if (options.fp16 != 0 || options.int8 != 0) {
            return fail(RTQ_TRT_ERR_INVALID_ARGUMENT,
                        "the fp16/int8 builder flags apply to weakly typed builds only; a strongly typed network "
                        "takes its precisions from the model");
        }
        RTQ_TRT_ALLOW_DEPRECATED_BEGIN
        flags |= 1U << static_cast<uint32_t>(nvinfer1::NetworkDefinitionCreationFlag::kSTRONGLY_TYPED);
        RTQ_TRT_ALLOW_DEPRECATED_END
    }
#else
    if (options.strongly_typed == 0) {
        return fail(RTQ_TRT_ERR_UNSUPPORTED,
                    "TensorRT 11 builds every network strongly typed; weakly typed builds need TensorRT 10");
    }
    if (options.fp16 != 0 || options.int8 != 0) {
        return fail(RTQ_TRT_ERR_UNSUPPORTED,
                    "TensorRT 11 removed the FP16/INT8 builder flags: precisions come from the model (Q/DQ and casts)");
    }
#endif

    std::unique_ptr<nvinfer1::INetworkDefinition> network(b.builder->createNetworkV2(flags));
    if (!network) {
        return fail(RTQ_TRT_ERR_BUILD, std::string("TensorRT could not create a network definition") +
                                           b.logger.errors_since(start_mark));
    }
    std::unique_ptr<nvonnxparser::IParser> parser(nvonnxparser::createParser(*network, b.logger));
    if (!parser) {
        return fail(RTQ_TRT_ERR_PARSE, std::string("TensorRT could not create the ONNX parser") +
                                           b.logger.errors_since(start_mark));
    }
    if (!parser->parse(onnx, onnx_size, options.model_path)) {
        std::string message = "the TensorRT ONNX parser rejected the model:";
        for (int32_t i = 0; i < parser->getNbErrors(); ++i) {
            const nvonnxparser::IParserError* error = parser->getError(i);
            if (error == nullptr) continue;
            message += "\n  ";
            if (error->node() >= 0) {
                message += "node " + std::to_string(error->node());
                const char* node_name = error->nodeName();
                const char* node_op = error->nodeOperator();
                if (node_name != nullptr && node_name[0] != '\0') message.append(" `").append(node_name).append("`");
                if (node_op != nullptr && node_op[0] != '\0') message.append(" (").append(node_op).append(")");
                message += ": ";
            }
            message += error->desc() != nullptr ? error->desc() : "unknown error";
        }
        message += b.logger.errors_since(start_mark);
        return fail(RTQ_TRT_ERR_PARSE, message);
    }

    std::unique_ptr<nvinfer1::IBuilderConfig> config(b.builder->createBuilderConfig());
    if (!config) {
        return fail(RTQ_TRT_ERR_BUILD, std::string("TensorRT could not create a builder configuration") +
                                           b.logger.errors_since(start_mark));
    }
    if (options.workspace_bytes > 0) {
        config->setMemoryPoolLimit(nvinfer1::MemoryPoolType::kWORKSPACE,
                                   static_cast<std::size_t>(options.workspace_bytes));
    }
    if (options.builder_optimization_level >= 0) {
        if (options.builder_optimization_level > 5) {
            return fail(RTQ_TRT_ERR_INVALID_ARGUMENT,
                        ("builder optimization level " + std::to_string(options.builder_optimization_level) +
                         " is out of range 0..=5").c_str());
        }
        config->setBuilderOptimizationLevel(options.builder_optimization_level);
    }
#if RTQ_TRT_HAS_WEAK_TYPING
    RTQ_TRT_ALLOW_DEPRECATED_BEGIN
    if (options.fp16 != 0) config->setFlag(nvinfer1::BuilderFlag::kFP16);
    if (options.int8 != 0) config->setFlag(nvinfer1::BuilderFlag::kINT8);
    RTQ_TRT_ALLOW_DEPRECATED_END
#endif

    const rtq_trt_status profile_status = add_profile(b, *network, *config, options);
    if (profile_status != RTQ_TRT_OK) {
        return profile_status;
    }

    // Timing cache: start from the given one; one from another TensorRT version or
    // GPU is replaced by an empty cache (with a warning) rather than failing the build.
    std::unique_ptr<nvinfer1::ITimingCache> cache;
    if (options.timing_cache != nullptr && options.timing_cache_size > 0) {
        cache.reset(config->createTimingCache(options.timing_cache, options.timing_cache_size));
        if (cache && !config->setTimingCache(*cache, false)) {
            cache.reset();
        }
        if (!cache) {
            b.logger.note(Severity::kWARNING,
                          "rtq: the timing cache does not match this TensorRT version or GPU; starting an empty one");
        }
    }
    if (!cache) {
        cache.reset(config->createTimingCache(nullptr, 0));
        if (!cache || !config->setTimingCache(*cache, false)) {
            return fail(RTQ_TRT_ERR_BUILD, std::string("TensorRT could not create a timing cache") +
                                               b.logger.errors_since(start_mark));
        }
    }

    std::unique_ptr<nvinfer1::IHostMemory> plan(b.builder->buildSerializedNetwork(*network, *config));
    if (!plan || plan->size() == 0) {
        return fail(RTQ_TRT_ERR_BUILD, std::string("TensorRT failed to build the engine") +
                                           b.logger.errors_since(start_mark));
    }

    std::unique_ptr<rtq_trt_blob> cache_blob;
    if (timing_cache_out != nullptr) {
        const nvinfer1::ITimingCache* used = config->getTimingCache();
        if (used != nullptr) {
            std::unique_ptr<nvinfer1::IHostMemory> serialized(used->serialize());
            if (serialized) {
                cache_blob.reset(new rtq_trt_blob{});
                cache_blob->memory = std::move(serialized);
            }
        }
    }
    std::unique_ptr<rtq_trt_blob> plan_blob(new rtq_trt_blob{});
    plan_blob->memory = std::move(plan);
    *plan_out = plan_blob.release();
    if (timing_cache_out != nullptr) {
        *timing_cache_out = cache_blob.release();
    }
    return RTQ_TRT_OK;
}

} // namespace

extern "C" {

int32_t rtq_trt_library_version(void) {
    return static_cast<int32_t>(getInferLibVersion());
}

int32_t rtq_trt_header_version(void) {
    return static_cast<int32_t>(NV_TENSORRT_MAJOR * 10000 + NV_TENSORRT_MINOR * 100 + NV_TENSORRT_PATCH);
}

size_t rtq_trt_last_error(char* buf, size_t buf_size) {
    return copy_out(t_last_error, buf, buf_size);
}

rtq_trt_status rtq_trt_builder_create(int32_t min_severity, rtq_trt_builder** out) {
    return guarded("rtq_trt_builder_create", [&]() -> rtq_trt_status {
        if (out == nullptr) {
            return fail(RTQ_TRT_ERR_INVALID_ARGUMENT, "rtq_trt_builder_create: `out` is NULL");
        }
        *out = nullptr;
        std::unique_ptr<rtq_trt_builder> handle(new rtq_trt_builder(to_severity(min_severity)));
        handle->builder.reset(nvinfer1::createInferBuilder(handle->logger));
        if (!handle->builder) {
            return fail(RTQ_TRT_ERR_BUILD, std::string("TensorRT could not create a builder (is a CUDA device "
                                                       "available and the driver recent enough?)") +
                                               handle->logger.errors_since(0));
        }
        *out = handle.release();
        return RTQ_TRT_OK;
    });
}

void rtq_trt_builder_destroy(rtq_trt_builder* builder) {
    delete builder;
}

size_t rtq_trt_builder_log(const rtq_trt_builder* builder, char* buf, size_t buf_size) {
    if (builder == nullptr) {
        return copy_out(std::string(), buf, buf_size);
    }
    try {
        return copy_out(builder->logger.dump(), buf, buf_size);
    } catch (...) {
        return copy_out(std::string(), buf, buf_size);
    }
}

rtq_trt_status rtq_trt_build_engine(rtq_trt_builder* builder, const void* onnx, size_t onnx_size,
                                    const rtq_trt_build_options* options, rtq_trt_blob** plan_out,
                                    rtq_trt_blob** timing_cache_out) {
    return guarded("rtq_trt_build_engine", [&]() -> rtq_trt_status {
        if (plan_out != nullptr) *plan_out = nullptr;
        if (timing_cache_out != nullptr) *timing_cache_out = nullptr;
        if (builder == nullptr || !builder->builder || onnx == nullptr || onnx_size == 0 || options == nullptr ||
            plan_out == nullptr) {
            return fail(RTQ_TRT_ERR_INVALID_ARGUMENT,
                        "rtq_trt_build_engine: builder, onnx bytes, options and plan_out are required");
        }
        if (options->nb_profiles > 0 && options->profiles == nullptr) {
            return fail(RTQ_TRT_ERR_INVALID_ARGUMENT, "rtq_trt_build_engine: nb_profiles > 0 but profiles is NULL");
        }
        return build(*builder, onnx, onnx_size, *options, plan_out, timing_cache_out);
    });
}

const void* rtq_trt_blob_data(const rtq_trt_blob* blob) {
    return blob != nullptr && blob->memory ? blob->memory->data() : nullptr;
}

size_t rtq_trt_blob_size(const rtq_trt_blob* blob) {
    return blob != nullptr && blob->memory ? blob->memory->size() : 0;
}

void rtq_trt_blob_destroy(rtq_trt_blob* blob) {
    delete blob;
}

rtq_trt_status rtq_trt_engine_deserialize(const void* plan, size_t plan_size, rtq_trt_engine** out) {
    return guarded("rtq_trt_engine_deserialize", [&]() -> rtq_trt_status {
        if (out == nullptr || plan == nullptr || plan_size == 0) {
            return fail(RTQ_TRT_ERR_INVALID_ARGUMENT, "rtq_trt_engine_deserialize: plan bytes and `out` are required");
        }
        *out = nullptr;
        std::unique_ptr<rtq_trt_engine> handle(new rtq_trt_engine());
        handle->runtime.reset(nvinfer1::createInferRuntime(handle->logger));
        if (!handle->runtime) {
            return fail(RTQ_TRT_ERR_DESERIALIZE,
                        std::string("TensorRT could not create a runtime") + handle->logger.errors_since(0));
        }
        handle->engine.reset(handle->runtime->deserializeCudaEngine(plan, plan_size));
        if (!handle->engine) {
            return fail(RTQ_TRT_ERR_DESERIALIZE,
                        std::string("TensorRT could not deserialize the plan (a plan only loads with the TensorRT "
                                    "version and GPU model it was built for)") +
                            handle->logger.errors_since(0));
        }
        *out = handle.release();
        return RTQ_TRT_OK;
    });
}

void rtq_trt_engine_destroy(rtq_trt_engine* engine) {
    delete engine;
}

int32_t rtq_trt_engine_num_io_tensors(const rtq_trt_engine* engine) {
    return engine != nullptr && engine->engine ? engine->engine->getNbIOTensors() : 0;
}

rtq_trt_status rtq_trt_engine_io_tensor(const rtq_trt_engine* engine, int32_t index, rtq_trt_tensor_desc* out) {
    return guarded("rtq_trt_engine_io_tensor", [&]() -> rtq_trt_status {
        if (engine == nullptr || !engine->engine || out == nullptr) {
            return fail(RTQ_TRT_ERR_INVALID_ARGUMENT, "rtq_trt_engine_io_tensor: engine and `out` are required");
        }
        *out = rtq_trt_tensor_desc{};
        const nvinfer1::ICudaEngine& e = *engine->engine;
        if (index < 0 || index >= e.getNbIOTensors()) {
            return fail(RTQ_TRT_ERR_NOT_FOUND, "I/O tensor index " + std::to_string(index) + " is out of range (" +
                                                   std::to_string(e.getNbIOTensors()) + " I/O tensors)");
        }
        const char* name = e.getIOTensorName(index);
        if (name == nullptr) {
            return fail(RTQ_TRT_ERR_NOT_FOUND, "I/O tensor " + std::to_string(index) + " has no name");
        }
        out->name = name;
        switch (e.getTensorIOMode(name)) {
        case nvinfer1::TensorIOMode::kINPUT: out->io_mode = RTQ_TRT_IO_INPUT; break;
        case nvinfer1::TensorIOMode::kOUTPUT: out->io_mode = RTQ_TRT_IO_OUTPUT; break;
        default: out->io_mode = RTQ_TRT_IO_NONE; break;
        }
        out->dtype = to_dtype(e.getTensorDataType(name));
        out->location = e.getTensorLocation(name) == nvinfer1::TensorLocation::kHOST ? RTQ_TRT_LOCATION_HOST
                                                                                      : RTQ_TRT_LOCATION_DEVICE;
        if (!from_trt_dims(e.getTensorShape(name), out->shape)) {
            return fail(RTQ_TRT_ERR_INTERNAL, std::string("TensorRT reported no shape for I/O tensor `") + name + "`");
        }
        return RTQ_TRT_OK;
    });
}

int32_t rtq_trt_engine_num_profiles(const rtq_trt_engine* engine) {
    return engine != nullptr && engine->engine ? engine->engine->getNbOptimizationProfiles() : 0;
}

rtq_trt_status rtq_trt_engine_profile_shape(const rtq_trt_engine* engine, const char* name, int32_t profile,
                                            int32_t selector, rtq_trt_dims* out) {
    return guarded("rtq_trt_engine_profile_shape", [&]() -> rtq_trt_status {
        if (engine == nullptr || !engine->engine || name == nullptr || out == nullptr) {
            return fail(RTQ_TRT_ERR_INVALID_ARGUMENT,
                        "rtq_trt_engine_profile_shape: engine, name and `out` are required");
        }
        *out = rtq_trt_dims{};
        const nvinfer1::ICudaEngine& e = *engine->engine;
        if (profile < 0 || profile >= e.getNbOptimizationProfiles()) {
            return fail(RTQ_TRT_ERR_NOT_FOUND, "optimization profile " + std::to_string(profile) +
                                                   " does not exist (the engine has " +
                                                   std::to_string(e.getNbOptimizationProfiles()) + ")");
        }
        nvinfer1::OptProfileSelector which;
        switch (selector) {
        case RTQ_TRT_PROFILE_MIN: which = nvinfer1::OptProfileSelector::kMIN; break;
        case RTQ_TRT_PROFILE_OPT: which = nvinfer1::OptProfileSelector::kOPT; break;
        case RTQ_TRT_PROFILE_MAX: which = nvinfer1::OptProfileSelector::kMAX; break;
        default:
            return fail(RTQ_TRT_ERR_INVALID_ARGUMENT, "profile selector " + std::to_string(selector) +
                                                          " is not RTQ_TRT_PROFILE_MIN/OPT/MAX");
        }
        if (e.getTensorIOMode(name) != nvinfer1::TensorIOMode::kINPUT) {
            return fail(RTQ_TRT_ERR_NOT_FOUND, std::string("`") + name + "` is not an input of the engine");
        }
        if (!from_trt_dims(e.getProfileShape(name, profile, which), *out)) {
            return fail(RTQ_TRT_ERR_NOT_FOUND, std::string("input `") + name + "` has no shape in profile " +
                                                   std::to_string(profile));
        }
        return RTQ_TRT_OK;
    });
}

rtq_trt_status rtq_trt_context_create(rtq_trt_engine* engine, rtq_trt_context** out) {
    return guarded("rtq_trt_context_create", [&]() -> rtq_trt_status {
        if (engine == nullptr || !engine->engine || out == nullptr) {
            return fail(RTQ_TRT_ERR_INVALID_ARGUMENT, "rtq_trt_context_create: engine and `out` are required");
        }
        *out = nullptr;
        const size_t mark = engine->logger.mark();
        std::unique_ptr<rtq_trt_context> handle(new rtq_trt_context{});
        handle->engine = engine;
        handle->context.reset(engine->engine->createExecutionContext());
        if (!handle->context) {
            return fail(RTQ_TRT_ERR_OUT_OF_MEMORY,
                        std::string("TensorRT could not create an execution context (out of device memory?)") +
                            engine->logger.errors_since(mark));
        }
        *out = handle.release();
        return RTQ_TRT_OK;
    });
}

void rtq_trt_context_destroy(rtq_trt_context* context) {
    delete context;
}

rtq_trt_status rtq_trt_context_set_input_shape(rtq_trt_context* context, const char* name,
                                               const rtq_trt_dims* dims) {
    return guarded("rtq_trt_context_set_input_shape", [&]() -> rtq_trt_status {
        if (context == nullptr || !context->context || name == nullptr || dims == nullptr) {
            return fail(RTQ_TRT_ERR_INVALID_ARGUMENT,
                        "rtq_trt_context_set_input_shape: context, name and dims are required");
        }
        Dims trt_dims{};
        if (!to_trt_dims(*dims, trt_dims)) {
            return fail(RTQ_TRT_ERR_INVALID_ARGUMENT, std::string("input `") + name + "`: rank " +
                                                          std::to_string(dims->nb_dims) + " is out of range");
        }
        const size_t mark = context->engine->logger.mark();
        if (!context->context->setInputShape(name, trt_dims)) {
            return fail(RTQ_TRT_ERR_EXECUTION, std::string("input `") + name + "`: TensorRT rejected shape " +
                                                   dims_to_string(trt_dims) +
                                                   context->engine->logger.errors_since(mark));
        }
        return RTQ_TRT_OK;
    });
}

rtq_trt_status rtq_trt_context_tensor_shape(const rtq_trt_context* context, const char* name, rtq_trt_dims* out) {
    return guarded("rtq_trt_context_tensor_shape", [&]() -> rtq_trt_status {
        if (context == nullptr || !context->context || name == nullptr || out == nullptr) {
            return fail(RTQ_TRT_ERR_INVALID_ARGUMENT,
                        "rtq_trt_context_tensor_shape: context, name and `out` are required");
        }
        if (!from_trt_dims(context->context->getTensorShape(name), *out)) {
            return fail(RTQ_TRT_ERR_NOT_FOUND, std::string("`") + name + "` is not an I/O tensor of the engine");
        }
        return RTQ_TRT_OK;
    });
}

rtq_trt_status rtq_trt_context_set_tensor_address(rtq_trt_context* context, const char* name, void* address) {
    return guarded("rtq_trt_context_set_tensor_address", [&]() -> rtq_trt_status {
        if (context == nullptr || !context->context || name == nullptr) {
            return fail(RTQ_TRT_ERR_INVALID_ARGUMENT,
                        "rtq_trt_context_set_tensor_address: context and name are required");
        }
        const size_t mark = context->engine->logger.mark();
        if (!context->context->setTensorAddress(name, address)) {
            return fail(RTQ_TRT_ERR_EXECUTION, std::string("`") + name + "`: TensorRT rejected the tensor address" +
                                                   context->engine->logger.errors_since(mark));
        }
        return RTQ_TRT_OK;
    });
}

rtq_trt_status rtq_trt_context_enqueue(rtq_trt_context* context, void* cuda_stream) {
    return guarded("rtq_trt_context_enqueue", [&]() -> rtq_trt_status {
        if (context == nullptr || !context->context) {
            return fail(RTQ_TRT_ERR_INVALID_ARGUMENT, "rtq_trt_context_enqueue: context is required");
        }
        const size_t mark = context->engine->logger.mark();
        if (!context->context->enqueueV3(static_cast<cudaStream_t>(cuda_stream))) {
            return fail(RTQ_TRT_ERR_EXECUTION,
                        std::string("TensorRT failed to enqueue inference") + context->engine->logger.errors_since(mark));
        }
        return RTQ_TRT_OK;
    });
}

} // extern "C"

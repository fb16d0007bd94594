// libloom_java: the native methods of com.microsoft.CNTK.Native, each one call of Loom's C API
// (loom_c.h) with Java's arrays. A failed call throws the Java exception that matches its
// status with the C API's message; the method's return value is then ignored by the JVM.
#include <jni.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "loom_c.h"

namespace {

// The Java exception class for a status: CNTK's Java API threw RuntimeExceptions, and these
// are all RuntimeExceptions.
const char* exception_class(loom_status status) {
  switch (status) {
    case LOOM_STATUS_ARGUMENT_ERROR:
    case LOOM_STATUS_SHAPE_ERROR:
      return "java/lang/IllegalArgumentException";
    case LOOM_STATUS_INVALID_HANDLE:
    case LOOM_STATUS_STATE_ERROR:
      return "java/lang/IllegalStateException";
    case LOOM_STATUS_IO_ERROR:
      return "java/io/UncheckedIOException";
    default:
      return "java/lang/RuntimeException";
  }
}

// A Java String from UTF-8 (JNI's NewStringUTF expects modified UTF-8, which differs for
// characters outside the BMP).
jstring java_string(JNIEnv* env, const char* utf8) {
  const jsize n = jsize(std::strlen(utf8));
  jbyteArray bytes = env->NewByteArray(n);
  if (bytes == nullptr) return nullptr;
  env->SetByteArrayRegion(bytes, 0, n, reinterpret_cast<const jbyte*>(utf8));
  jclass string_class = env->FindClass("java/lang/String");
  jmethodID ctor = env->GetMethodID(string_class, "<init>", "([BLjava/lang/String;)V");
  return static_cast<jstring>(
      env->NewObject(string_class, ctor, bytes, env->NewStringUTF("UTF-8")));
}

// Throws the exception for a failed status; true when the call succeeded.
bool ok(JNIEnv* env, loom_status status) {
  if (status == LOOM_OK) return true;
  jstring message = java_string(env, loom_last_error_message());
  if (message == nullptr) return false;  // an OutOfMemoryError is pending
  jclass cls = env->FindClass(exception_class(status));
  jobject error;
  if (status == LOOM_STATUS_IO_ERROR) {  // UncheckedIOException wraps an IOException
    jclass io = env->FindClass("java/io/IOException");
    jobject cause =
        env->NewObject(io, env->GetMethodID(io, "<init>", "(Ljava/lang/String;)V"), message);
    error = env->NewObject(
        cls, env->GetMethodID(cls, "<init>", "(Ljava/lang/String;Ljava/io/IOException;)V"), message,
        cause);
  } else {
    error = env->NewObject(cls, env->GetMethodID(cls, "<init>", "(Ljava/lang/String;)V"), message);
  }
  env->Throw(static_cast<jthrowable>(error));
  return false;
}

loom_model* model_of(jlong handle) {
  return reinterpret_cast<loom_model*>(handle);
}
loom_value* value_of(jlong handle) {
  return reinterpret_cast<loom_value*>(handle);
}

// A Java array's elements for the length of one call (released without copying back).
template <typename Array, typename T>
class Elements {
 public:
  Elements(JNIEnv* env, Array array) : env_(env), array_(array) {
    if (array != nullptr) {
      data_ = static_cast<T*>(env->GetPrimitiveArrayCritical(array, nullptr));
      size_ = env->GetArrayLength(array);
    }
  }
  ~Elements() {
    if (data_ != nullptr) env_->ReleasePrimitiveArrayCritical(array_, data_, JNI_ABORT);
  }
  Elements(const Elements&) = delete;
  Elements& operator=(const Elements&) = delete;
  const T* data() const { return data_; }
  int64_t size() const { return size_; }

 private:
  JNIEnv* env_;
  Array array_;
  T* data_ = nullptr;
  int64_t size_ = 0;
};

// A Java long[]'s elements (none for null), copied: on the stack when they are few, as an
// evaluation's indices and a shape are.
class Longs {
 public:
  Longs(JNIEnv* env, jlongArray array) {
    if (array == nullptr) return;
    size_ = env->GetArrayLength(array);
    if (size_ > jsize(kInline)) {
      heap_.resize(size_t(size_));
      data_ = heap_.data();
    }
    env->GetLongArrayRegion(array, 0, size_, reinterpret_cast<jlong*>(data_));
  }
  Longs(const Longs&) = delete;
  Longs& operator=(const Longs&) = delete;
  const int64_t* data() const { return data_; }
  int64_t size() const { return size_; }

 private:
  static constexpr size_t kInline = 16;
  int64_t inline_[kInline];
  std::vector<int64_t> heap_;
  int64_t* data_ = inline_;
  jsize size_ = 0;
};

// count pointers, on the stack when they are few.
template <typename T>
class Pointers {
 public:
  explicit Pointers(size_t count) {
    if (count > kInline) {
      heap_.resize(count);
      data_ = heap_.data();
    }
  }
  Pointers(const Pointers&) = delete;
  Pointers& operator=(const Pointers&) = delete;
  T** data() { return data_; }
  T*& operator[](size_t i) { return data_[i]; }

 private:
  static constexpr size_t kInline = 16;
  T* inline_[kInline] = {};
  std::vector<T*> heap_;
  T** data_ = inline_;
};

jlongArray long_array(JNIEnv* env, const std::vector<int64_t>& values) {
  jlongArray out = env->NewLongArray(jsize(values.size()));
  if (out != nullptr)
    env->SetLongArrayRegion(out, 0, jsize(values.size()),
                            reinterpret_cast<const jlong*>(values.data()));
  return out;
}

jbyteArray byte_array(JNIEnv* env, const char* text) {
  const jsize n = jsize(std::strlen(text));
  jbyteArray out = env->NewByteArray(n);
  if (out != nullptr) env->SetByteArrayRegion(out, 0, n, reinterpret_cast<const jbyte*>(text));
  return out;
}

// Throws an IllegalArgumentException with this message.
void throw_argument_error(JNIEnv* env, const char* message) {
  jclass cls = env->FindClass("java/lang/IllegalArgumentException");
  if (cls != nullptr) env->ThrowNew(cls, message);
}

// num_samples dense samples (lengths null) or sequences from the first count elements of data
// (dtype's elements): the caller's vector storage, often longer than its contents.
template <typename Array, typename T>
jlong create_dense(JNIEnv* env, loom_dtype dtype, jlongArray shape, jlong num_samples,
                   jlongArray lengths, Array data, jint count) {
  // Read first: no JNI call may come between GetPrimitiveArrayCritical and its release.
  const Longs dims(env, shape), lens(env, lengths);
  if (data != nullptr && (count < 0 || count > env->GetArrayLength(data))) {
    throw_argument_error(env, "createDense: count is outside the data array");
    return 0;
  }
  loom_value* value = nullptr;
  loom_status status;
  {
    Elements<Array, T> values(env, data);
    const int64_t n = data != nullptr ? int64_t(count) : 0;
    status = lengths == nullptr
                 ? loom_value_create_dense(dtype, dims.data(), dims.size(), num_samples,
                                           values.data(), n, &value)
                 : loom_value_create_dense_sequences(dtype, dims.data(), dims.size(), lens.size(),
                                                     lens.data(), values.data(), n, &value);
  }
  return ok(env, status) ? reinterpret_cast<jlong>(value) : 0;
}

// A value's packed data as a new Java array of dtype's elements, copied straight into it.
template <typename Array>
Array value_data(JNIEnv* env, jlong handle, loom_dtype dtype, Array (JNIEnv::*make)(jsize)) {
  int64_t count = 0;
  if (!ok(env, loom_value_element_count(value_of(handle), &count))) return nullptr;
  Array out = (env->*make)(jsize(count));
  if (out == nullptr) return nullptr;
  void* target = env->GetPrimitiveArrayCritical(out, nullptr);
  const loom_status status = loom_value_copy_data(value_of(handle), dtype, target, count);
  env->ReleasePrimitiveArrayCritical(out, target, 0);
  return ok(env, status) ? out : nullptr;
}

}  // namespace

extern "C" {

#define LOOM_JNI(ret, name) JNIEXPORT ret JNICALL Java_com_microsoft_CNTK_Native_##name

LOOM_JNI(jint, apiVersion)(JNIEnv*, jclass) {
  return loom_c_api_version();
}

LOOM_JNI(jlong, loadModel)(JNIEnv* env, jclass, jbyteArray utf8_path) {
  std::vector<char> path(static_cast<size_t>(env->GetArrayLength(utf8_path)));
  env->GetByteArrayRegion(utf8_path, 0, jsize(path.size()), reinterpret_cast<jbyte*>(path.data()));
  loom_model* model = nullptr;
  return ok(env, loom_model_load(path.data(), &model)) ? reinterpret_cast<jlong>(model) : 0;
}

LOOM_JNI(jlong, loadModelFromBytes)(JNIEnv* env, jclass, jbyteArray bytes) {
  loom_model* model = nullptr;
  loom_status status;
  {
    Elements<jbyteArray, jbyte> data(env, bytes);
    status = loom_model_load_from_bytes(data.data(), data.size(), &model);
  }
  return ok(env, status) ? reinterpret_cast<jlong>(model) : 0;
}

LOOM_JNI(jlong, cloneModel)(JNIEnv* env, jclass, jlong model) {
  loom_model* clone = nullptr;
  return ok(env, loom_model_clone(model_of(model), &clone)) ? reinterpret_cast<jlong>(clone) : 0;
}

LOOM_JNI(void, freeModel)(JNIEnv* env, jclass, jlong model) {
  ok(env, loom_model_free(model_of(model)));
}

LOOM_JNI(jint, variableCount)(JNIEnv* env, jclass, jlong model, jint kind) {
  int64_t count = 0;
  ok(env, loom_model_variable_count(model_of(model), kind, &count));
  return jint(count);
}

LOOM_JNI(jbyteArray, variableName)(JNIEnv* env, jclass, jlong model, jint kind, jint index) {
  const char* name = nullptr;
  return ok(env, loom_model_variable_name(model_of(model), kind, index, &name))
             ? byte_array(env, name)
             : nullptr;
}

LOOM_JNI(jbyteArray, variableUid)(JNIEnv* env, jclass, jlong model, jint kind, jint index) {
  const char* uid = nullptr;
  return ok(env, loom_model_variable_uid(model_of(model), kind, index, &uid)) ? byte_array(env, uid)
                                                                              : nullptr;
}

LOOM_JNI(jint, variableDataType)(JNIEnv* env, jclass, jlong model, jint kind, jint index) {
  loom_dtype dtype = 0;
  ok(env, loom_model_variable_dtype(model_of(model), kind, index, &dtype));
  return dtype;
}

LOOM_JNI(jint, variableFlags)(JNIEnv* env, jclass, jlong model, jint kind, jint index) {
  int32_t flags = 0;
  ok(env, loom_model_variable_flags(model_of(model), kind, index, &flags));
  return flags;
}

LOOM_JNI(jlongArray, variableShape)(JNIEnv* env, jclass, jlong model, jint kind, jint index) {
  int64_t rank = 0;
  if (!ok(env, loom_model_variable_rank(model_of(model), kind, index, &rank))) return nullptr;
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  if (!ok(env, loom_model_variable_shape(model_of(model), kind, index, dims.data(), rank)))
    return nullptr;
  return long_array(env, dims);
}

// Outputs chosen among the model's outputs (nodes false) or its node outputs (LOOM_NODE).
LOOM_JNI(jlongArray, evaluate)
(JNIEnv* env, jclass, jlong model, jlongArray input_indices, jlongArray inputs,
 jlongArray output_indices, jboolean nodes) {
  const Longs in_index(env, input_indices), handles(env, inputs), out_index(env, output_indices);
  if (handles.size() != in_index.size()) {
    throw_argument_error(env, "evaluate: as many input values as input indices are needed");
    return nullptr;
  }
  Pointers<loom_value> in(size_t(handles.size()));
  for (int64_t i = 0; i < handles.size(); ++i) in[size_t(i)] = value_of(handles.data()[i]);
  Pointers<loom_value> out(size_t(out_index.size()));
  const auto evaluate = nodes ? loom_model_evaluate_nodes : loom_model_evaluate_by_index;
  if (!ok(env, evaluate(model_of(model), in_index.size(), in_index.data(), in.data(),
                        out_index.size(), out_index.data(), out.data())))
    return nullptr;
  jlongArray results = env->NewLongArray(jsize(out_index.size()));
  if (results == nullptr) {  // an OutOfMemoryError is pending: the values are not returned
    for (int64_t i = 0; i < out_index.size(); ++i) loom_value_free(out[size_t(i)]);
    return nullptr;
  }
  for (int64_t i = 0; i < out_index.size(); ++i) {
    const jlong h = reinterpret_cast<jlong>(out[size_t(i)]);
    env->SetLongArrayRegion(results, jsize(i), 1, &h);
  }
  return results;
}

LOOM_JNI(jlong, createDenseFloat)
(JNIEnv* env, jclass, jlongArray shape, jlong num_samples, jlongArray lengths, jfloatArray data,
 jint count) {
  return create_dense<jfloatArray, jfloat>(env, LOOM_FLOAT32, shape, num_samples, lengths, data,
                                           count);
}

LOOM_JNI(jlong, createDenseDouble)
(JNIEnv* env, jclass, jlongArray shape, jlong num_samples, jlongArray lengths, jdoubleArray data,
 jint count) {
  return create_dense<jdoubleArray, jdouble>(env, LOOM_FLOAT64, shape, num_samples, lengths, data,
                                             count);
}

LOOM_JNI(jlong, createOneHot)
(JNIEnv* env, jclass, jint dtype, jlong dimension, jlongArray lengths, jlongArray indices) {
  const Longs hot(env, indices), lens(env, lengths);
  loom_value* value = nullptr;
  const loom_status status =
      lengths == nullptr
          ? loom_value_create_one_hot(dtype, dimension, hot.size(), hot.data(), &value)
          : loom_value_create_one_hot_sequences(dtype, dimension, lens.size(), lens.data(),
                                                hot.data(), &value);
  return ok(env, status) ? reinterpret_cast<jlong>(value) : 0;
}

LOOM_JNI(jint, valueDataType)(JNIEnv* env, jclass, jlong value) {
  loom_dtype dtype = 0;
  ok(env, loom_value_dtype(value_of(value), &dtype));
  return dtype;
}

LOOM_JNI(jint, valueFlags)(JNIEnv* env, jclass, jlong value) {
  int32_t flags = 0;
  ok(env, loom_value_flags(value_of(value), &flags));
  return flags;
}

// A value's layout in one call: {rank, the sample shape's rank dimensions (Loom's order),
// the number of sequences n, the n sequence lengths}.
LOOM_JNI(jlongArray, valueLayout)(JNIEnv* env, jclass, jlong value) {
  const loom_value* v = value_of(value);
  int64_t rank = 0, n = 0;
  if (!ok(env, loom_value_sample_rank(v, &rank)) || !ok(env, loom_value_num_sequences(v, &n)))
    return nullptr;
  std::vector<int64_t> layout(size_t(rank + n + 2));
  layout[0] = rank;
  layout[size_t(rank) + 1] = n;
  if (!ok(env, loom_value_sample_shape(v, layout.data() + 1, rank)) ||
      !ok(env, loom_value_sequence_lengths(v, layout.data() + rank + 2, n)))
    return nullptr;
  return long_array(env, layout);
}

LOOM_JNI(jfloatArray, valueFloats)(JNIEnv* env, jclass, jlong value) {
  return value_data(env, value, LOOM_FLOAT32, &JNIEnv::NewFloatArray);
}

LOOM_JNI(jdoubleArray, valueDoubles)(JNIEnv* env, jclass, jlong value) {
  return value_data(env, value, LOOM_FLOAT64, &JNIEnv::NewDoubleArray);
}

LOOM_JNI(void, freeValue)(JNIEnv* env, jclass, jlong value) {
  ok(env, loom_value_free(value_of(value)));
}

}  // extern "C"

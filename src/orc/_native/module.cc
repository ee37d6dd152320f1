// The Python extension module orc._native._kernels: built at install time
// (CMakeLists.txt at the repository root), imported like any module, so no
// compiler runs and no shared library is looked up at run time.
//
//   handlers()          {FFI target name: PyCapsule of its XLA FFI handler}
//   cuda_handlers()     the same for the CUDA platform (cuda_cluster.cc)
//   set_nvrtc_path(str) the NVRTC library the CUDA handler compiles with
//   set_routines(dict)  {"dsyrk": capsule, ...}: SciPy's BLAS/LAPACK
//                       routines, from scipy.linalg.cython_blas/_lapack's
//                       __pyx_capi__ (a capsule's pointer is the routine)
//   routines()          {name: whether it is set}
//   config()            {"ell": ..., "tanh": ..., "gram": ..., "pool_threads": ...,
//                        "thread_limit": ..., "variants": ...}
//   set_variants(str)   variants from a spec (calibration.txt next to this
//                       module, ORC_NATIVE_VARIANTS); ValueError if invalid
//   calibrate()         measure the variants here; a spec with comments

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "orc_native.h"

namespace {

// {target: capsule} for the handlers a list macro names
#define ORC_HANDLER_DICT(LIST)                                                     \
  PyObject* out = PyDict_New();                                                    \
  if (out == nullptr) return nullptr;                                              \
  LIST(ORC_ADD_HANDLER)                                                            \
  return out;

PyObject* Handlers(PyObject*, PyObject*) {
#define ORC_ADD_HANDLER(target, symbol)                                            \
  {                                                                                \
    PyObject* capsule = PyCapsule_New(reinterpret_cast<void*>(&symbol), nullptr,   \
                                      nullptr);                                    \
    if (capsule == nullptr || PyDict_SetItemString(out, #target, capsule) != 0) {  \
      Py_XDECREF(capsule);                                                         \
      Py_DECREF(out);                                                              \
      return nullptr;                                                              \
    }                                                                              \
    Py_DECREF(capsule);                                                            \
  }
  ORC_HANDLER_DICT(ORC_NATIVE_HANDLERS)
}

PyObject* CudaHandlers(PyObject*, PyObject*) { ORC_HANDLER_DICT(ORC_CUDA_HANDLERS) }
#undef ORC_ADD_HANDLER
#undef ORC_HANDLER_DICT

// The text of the str argument of `function` (UTF-8), or nullptr with the
// Python error set (TypeError for an argument that is not a str).
const char* StrArgument(PyObject* arg, const char* function) {
  if (!PyUnicode_Check(arg)) {
    PyErr_Format(PyExc_TypeError, "%s: expected a str", function);
    return nullptr;
  }
  return PyUnicode_AsUTF8(arg);
}

PyObject* SetNvrtcPath(PyObject*, PyObject* path) {
  const char* text = StrArgument(path, "set_nvrtc_path");
  if (text == nullptr) return nullptr;
  orc_native::SetNvrtcPath(text);
  Py_RETURN_NONE;
}

PyObject* SetRoutines(PyObject*, PyObject* table) {
  if (!PyDict_Check(table)) {
    PyErr_SetString(PyExc_TypeError, "set_routines: expected a dict {name: capsule}");
    return nullptr;
  }
  for (int i = 0; i < orc_native::kRoutineCount; ++i) {
    PyObject* capsule = PyDict_GetItemString(table, orc_native::kRoutineNames[i]);
    if (capsule == nullptr) continue;  // borrowed; absent: leave it unset
    if (!PyCapsule_CheckExact(capsule)) {
      PyErr_Format(PyExc_TypeError, "set_routines: %s must be a PyCapsule",
                   orc_native::kRoutineNames[i]);
      return nullptr;
    }
    void* fn = PyCapsule_GetPointer(capsule, PyCapsule_GetName(capsule));
    if (fn == nullptr) return nullptr;
    orc_native::SetRoutine(i, fn);
  }
  Py_RETURN_NONE;
}

PyObject* Routines(PyObject*, PyObject*) {
  PyObject* out = PyDict_New();
  if (out == nullptr) return nullptr;
  for (int i = 0; i < orc_native::kRoutineCount; ++i) {
    PyObject* set = orc_native::GetRoutine(i) != nullptr ? Py_True : Py_False;
    if (PyDict_SetItemString(out, orc_native::kRoutineNames[i], set) != 0) {
      Py_DECREF(out);
      return nullptr;
    }
  }
  return out;
}

PyObject* Config(PyObject*, PyObject*) {
  const std::string variants = orc_native::ActiveVariants();
  return Py_BuildValue("{s:s,s:s,s:s,s:L,s:L,s:s}", "ell", orc_native::EllVariant(), "tanh",
                       orc_native::TanhVariant(), "gram", orc_native::GramVariant(),
                       "pool_threads", static_cast<long long>(orc_native::PoolThreads()),
                       "thread_limit", static_cast<long long>(orc_native::ThreadLimit()),
                       "variants", variants.c_str());
}

PyObject* SetVariants(PyObject*, PyObject* spec) {
  const char* text = StrArgument(spec, "set_variants");
  if (text == nullptr) return nullptr;
  const std::string error = orc_native::SetVariants(text);
  if (!error.empty()) {
    PyErr_SetString(PyExc_ValueError, error.c_str());
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* Calibrate(PyObject*, PyObject*) {
  std::string text;
  Py_BEGIN_ALLOW_THREADS
  text = orc_native::Calibrate();
  Py_END_ALLOW_THREADS
  return PyUnicode_FromString(text.c_str());
}

PyMethodDef kMethods[] = {
    {"handlers", Handlers, METH_NOARGS, "FFI target name -> capsule of its handler."},
    {"cuda_handlers", CudaHandlers, METH_NOARGS, "The same for the CUDA platform."},
    {"set_nvrtc_path", SetNvrtcPath, METH_O, "The NVRTC library the CUDA handler uses."},
    {"set_routines", SetRoutines, METH_O, "Set the BLAS/LAPACK routines from capsules."},
    {"routines", Routines, METH_NOARGS, "Routine name -> whether it is set."},
    {"config", Config, METH_NOARGS, "The kernel variants picked on this CPU."},
    {"set_variants", SetVariants, METH_O, "Set kernel variants from a spec (before any call)."},
    {"calibrate", Calibrate, METH_NOARGS, "Measure the variants; a spec with comments."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT, "_kernels", "orc's native CPU kernels (XLA FFI handlers).", -1,
    kMethods,
};

}  // namespace

PyMODINIT_FUNC PyInit__kernels() { return PyModule_Create(&kModule); }

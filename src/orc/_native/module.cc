// The Python extension module orc._native._kernels: built at install time
// (CMakeLists.txt at the repository root), imported like any module, so no
// compiler runs and no shared library is looked up at run time.
//
//   handlers()          {FFI target name: PyCapsule of its XLA FFI handler}
//   set_routines(dict)  {"dsyrk": capsule, ...}: SciPy's BLAS/LAPACK
//                       routines, from scipy.linalg.cython_blas/_lapack's
//                       __pyx_capi__ (a capsule's pointer is the routine)
//   routines()          {name: whether it is set}
//   config()            {"ell": ..., "tanh": ..., "gram_kernel": ..., "gram": ...,
//                        "threads": ...}

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "orc_native.h"

namespace {

PyObject* Handlers(PyObject*, PyObject*) {
  PyObject* out = PyDict_New();
  if (out == nullptr) return nullptr;
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
  ORC_NATIVE_HANDLERS(ORC_ADD_HANDLER)
#undef ORC_ADD_HANDLER
  return out;
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
  return Py_BuildValue("{s:s,s:s,s:O,s:s,s:i}", "ell", orc_native::EllVariant(), "tanh",
                       orc_native::TanhVariant(), "gram_kernel",
                       orc_native::GramKernel() ? Py_True : Py_False, "gram",
                       orc_native::GramVariant(), "threads", orc_native::Threads());
}

PyMethodDef kMethods[] = {
    {"handlers", Handlers, METH_NOARGS, "FFI target name -> capsule of its handler."},
    {"set_routines", SetRoutines, METH_O, "Set the BLAS/LAPACK routines from capsules."},
    {"routines", Routines, METH_NOARGS, "Routine name -> whether it is set."},
    {"config", Config, METH_NOARGS, "The kernel variants picked on this CPU."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT, "_kernels", "orc's native CPU kernels (XLA FFI handlers).", -1,
    kMethods,
};

}  // namespace

PyMODINIT_FUNC PyInit__kernels() { return PyModule_Create(&kModule); }

// How the handlers are bound to XLA: a handler's parameter list is its
// binding. XLA_FFI_DEFINE_HANDLER_SYMBOL(Symbol, Handler<DT>), given no
// binding, has XLA infer it from the signature (Ffi::BindTo), parameter by
// parameter:
//
//   ffi::ThreadPool pool                  XLA's CPU thread pool of the call (context)
//   ffi::Buffer<DT> x                     the next operand of the call
//   ffi::ResultBuffer<DT> y               the next result of the call
//   ffi::Attr<int64_t, kStart> start_attr the int64 attribute "start" (*start_attr)
//
// so each handler's operands are written once, in its signature, and every
// handler source ends with its symbols, one line per element type.
#ifndef ORC_BIND_H_
#define ORC_BIND_H_

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

// XLA infers operands, results and attributes; a context parameter takes a
// declared binding, as XLA's api.h shows for a GPU stream (cuda_cluster.cc
// declares its stream's).
namespace xla::ffi {
template <>
struct CtxBinding<ThreadPool> {
  using Ctx = ThreadPool;
};
}  // namespace xla::ffi

namespace orc_native {

// The attributes of the statistics kernels (esn_fit, stats_update): the rows
// [start, stop) they add.
inline constexpr char kStart[] = "start";
inline constexpr char kStop[] = "stop";

}  // namespace orc_native

#endif  // ORC_BIND_H_

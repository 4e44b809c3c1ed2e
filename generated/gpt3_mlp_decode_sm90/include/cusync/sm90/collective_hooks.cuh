// cusync sm90 backend: how our derived CUTLASS 3.x collectives carry their synchronization fields.
//
// A CUTLASS collective takes its host-side Arguments, lowers them to device Params once
// (to_underlying_arguments), and receives those Params in the kernel. WithHooks<Base, Hooks> extends both
// with one member `hooks` of type Hooks, copied through as it is; everything else is Base's own.
#pragma once

#include "cutlass/cutlass.h"

namespace cusync::sm90 {

template <class Base, class Hooks>
struct WithHooks : Base {
  using Base::Base;

  struct Arguments : Base::Arguments {
    Hooks hooks{};
  };
  struct Params : Base::Params {
    Hooks hooks{};
  };

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const& problem_shape, Arguments const& args,
                                                  void* workspace) {
    Params params;
    static_cast<typename Base::Params&>(params) = Base::to_underlying_arguments(problem_shape, args, workspace);
    params.hooks = args.hooks;
    return params;
  }
};

}  // namespace cusync::sm90

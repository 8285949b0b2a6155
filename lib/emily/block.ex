defmodule Emily.Block do
  @moduledoc """
  The engine side of an `Nx.block/4` defined by Emily's own modules
  (`Emily.Fast`, `Emily.Quantization`).

  A block struct whose module implements this behaviour runs
  `emily_block/3` under `Emily.Backend` and `Emily.Compiler`; on any other
  backend Nx runs the block's composed fallback. `emily_block/3` receives
  the output template (a tensor, or a tuple of them) and the input tensors
  (on `Emily.Backend`), and returns the result in the template's shape, or
  `:fallback` when the kernel does not take these inputs (the composed
  version then runs on Emily).
  """

  @callback emily_block(struct(), out :: Nx.Tensor.t() | tuple(), args :: [term()]) ::
              Nx.Tensor.t() | tuple() | :fallback
end

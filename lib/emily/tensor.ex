defmodule Emily.Tensor do
  @moduledoc """
  Tensors for Elixir with Nx's API, computed by Emily's engine.

  `Emily.Tensor` mirrors `Nx`: the same function names, argument order,
  options (unknown options raise), type promotion, broadcasting and
  printing, so code written against `Nx` runs after renaming the module.
  A tensor is `%Emily.Tensor{ref: engine_ref, shape: tuple, type: {kind, bits}}`;
  operations are lazy in the engine and evaluated when data is read
  (`to_binary/1`, `to_list/1`, `inspect/1`, ...).

      iex> t = Emily.Tensor.tensor([[1, 2], [3, 4]])
      iex> Emily.Tensor.add(t, 1) |> Emily.Tensor.to_list()
      [[2, 3], [4, 5]]

  Functions live in implementation modules by family and are delegated
  from here; each delegate's documentation links to its implementation:

    * `Emily.Tensor.Creation` — tensor/2, from_binary, to_* conversions,
      metadata, iota, eye, fill, tri ...
    * `Emily.Tensor.Elementwise` — unary math, binary arithmetic,
      comparisons, logical and bitwise ops, select, clip ...
    * `Emily.Tensor.Reduction` — sum, product, reduce_max/min, mean,
      variance, median, argmax ...
    * `Emily.Tensor.ShapeOps` — reshape, transpose, pad, concatenate,
      slice, dot ...

  Differences from Nx: named axes, vectorization and defn are out of
  scope (see `docs/COVERAGE.md`); sub-byte and 8-bit float types are not
  supported; complex scalars are `Emily.Complex` structs.
  """

  @enforce_keys [:ref, :shape, :type]
  defstruct [:ref, :shape, :type]

  @type t :: %__MODULE__{ref: reference(), shape: tuple(), type: Emily.Tensor.Type.t()}

  # Each implementation module owns one region below; keep edits inside
  # your own region (`defdelegate name(args), to: Module`).

  # -- BEGIN creation --
  # -- END creation --

  # -- BEGIN elementwise --
  # -- END elementwise --

  # -- BEGIN reduction --
  # -- END reduction --

  # -- BEGIN shape --
  # -- END shape --
end

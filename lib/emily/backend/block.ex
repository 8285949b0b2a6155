defmodule Emily.Backend.Block do
  @moduledoc false
  # Nx.block/4 dispatch of Emily.Backend: the blocks with an engine kernel
  # run natively; any other block, and inputs a kernel does not take
  # (complex SVD, say), run Nx's default composition `fun`, which itself
  # runs on Emily tensors.

  alias Emily.Backend.{Elementwise, FFT, Indexing, LinAlg, Window}
  alias Nx.Block

  @scans %{
    Block.CumulativeSum => :sum,
    Block.CumulativeProduct => :product,
    Block.CumulativeMin => :min,
    Block.CumulativeMax => :max
  }

  def block(%Block.LogicalNot{}, out, [t], _fun), do: Elementwise.logical_not(out, t)
  def block(%Block.Phase{}, out, [%{type: {:c, _}} = t], _fun), do: Elementwise.phase(out, t)

  def block(%Block.LinAlg.Cholesky{}, out, [t], _fun), do: LinAlg.cholesky(out, t)
  def block(%Block.LinAlg.Solve{}, out, [a, b], _fun), do: LinAlg.solve(out, a, b)
  def block(%Block.LinAlg.QR{mode: mode}, out, [t], _fun), do: LinAlg.qr(out, t, mode)
  def block(%Block.LinAlg.Eigh{}, out, [t], _fun), do: LinAlg.eigh(out, t)
  def block(%Block.LinAlg.LU{}, out, [t], _fun), do: LinAlg.lu(out, t)
  def block(%Block.LinAlg.Determinant{}, out, [t], _fun), do: LinAlg.determinant(out, t)

  def block(%Block.LinAlg.SVD{full_matrices?: full}, out, [%{type: {kind, _}} = t], _fun)
      when kind != :c,
      do: LinAlg.svd(out, t, full)

  def block(%module{axis: axis, reverse: reverse}, out, [t], _fun)
      when is_map_key(@scans, module),
      do: Window.cumulative(out, t, Map.fetch!(@scans, module), axis, reverse)

  def block(%Block.Take{axis: axis}, out, [t, indices], _fun), do: Indexing.take(out, t, indices, axis)

  def block(%Block.TakeAlongAxis{axis: axis}, out, [t, indices], _fun),
    do: Indexing.take_along_axis(out, t, indices, axis)

  def block(%Block.TopK{k: k}, out, [t], _fun), do: Indexing.top_k(out, t, k)

  def block(%Block.FFT2{} = s, out, [t], _fun), do: FFT.fft2(out, t, s, :forward)
  def block(%Block.IFFT2{} = s, out, [t], _fun), do: FFT.fft2(out, t, s, :inverse)
  def block(%Block.RFFT{} = s, out, [t], _fun), do: FFT.rfft(out, t, s)
  def block(%Block.IRFFT{} = s, out, [t], _fun), do: FFT.irfft(out, t, s)

  # Blocks of Emily's own modules (Emily.Fast, Emily.Quantization) carry
  # their engine kernel: the struct's module implements Emily.Block.
  def block(%module{} = struct, out, args, fun) do
    result =
      if Code.ensure_loaded?(module) and function_exported?(module, :emily_block, 3),
        do: module.emily_block(struct, out, args),
        else: :fallback

    case result do
      :fallback -> apply(fun, [struct | args])
      result -> result
    end
  end
end

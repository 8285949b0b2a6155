defmodule EmilyTest.Helpers do
  @moduledoc false
  # Small builders and readers for tests written against Emily.Native.

  alias Emily.Native

  @doc "Every engine dtype but pred, as Nx type tuples (the types Emily.Backend stores natively)."
  def nx_types,
    do: [u: 8, u: 16, u: 32, u: 64, s: 8, s: 16, s: 32, s: 64, f: 16, bf: 16, f: 32, f: 64, c: 64, c: 128]

  def tensor(values, dtype, shape \\ nil) do
    shape = shape || [length(values)]
    Emily.from_binary(encode(values, dtype), shape, dtype)
  end

  def scalar(value, dtype), do: tensor([value], dtype, [])

  # An engine array as an Nx tensor on Emily.Backend (predicates read as u8),
  # for tests that build strided views or call Emily.Native directly.
  def wrap(ref) do
    {ref, type} =
      case Native.dtype(ref) do
        {:pred, 8} -> {Native.bitcast(ref, {:u, 8}), {:u, 8}}
        type -> {ref, type}
      end

    shape = List.to_tuple(Native.shape(ref))
    names = List.duplicate(nil, tuple_size(shape))
    %Nx.Tensor{data: %Emily.Backend{ref: ref}, shape: shape, type: type, names: names}
  end

  def values(t) do
    decode(Emily.to_binary(t), Native.dtype(t))
  end

  def encode(values, dtype), do: for(v <- values, into: <<>>, do: encode1(v, dtype))

  defp encode1(v, {:f, bits}), do: <<v::float-size(bits)-native>>
  defp encode1(v, {:s, bits}), do: <<v::signed-size(bits)-native>>
  defp encode1(v, {:u, bits}), do: <<v::unsigned-size(bits)-native>>
  defp encode1(v, {:pred, 8}), do: <<if(v in [true, 1], do: 1, else: 0)>>

  defp encode1({re, im}, {:c, bits}),
    do: <<re::float-size(div(bits, 2))-native, im::float-size(div(bits, 2))-native>>

  defp encode1(<<_::16>> = raw, {:bf, 16}), do: raw

  defp encode1(v, {:bf, 16}) do
    <<hi::16, _::16>> = <<v::float-32-big>>
    <<hi::16-native>>
  end

  def decode(bin, {:f, bits}), do: for(<<v::float-size(bits)-native <- bin>>, do: v)
  def decode(bin, {:s, bits}), do: for(<<v::signed-size(bits)-native <- bin>>, do: v)
  def decode(bin, {:u, bits}), do: for(<<v::unsigned-size(bits)-native <- bin>>, do: v)
  def decode(bin, {:pred, 8}), do: for(<<v <- bin>>, do: v)

  def decode(bin, {:c, bits}) do
    half = div(bits, 2)
    for <<re::float-size(half)-native, im::float-size(half)-native <- bin>>, do: {re, im}
  end

  def decode(bin, {:bf, 16}) do
    for <<v::16-native <- bin>> do
      <<f::float-32-big>> = <<v::16, 0::16>>
      f
    end
  end
end

Code.require_file("support/numpy.exs", __DIR__)

# :model_files tests open real model files named by environment variables
# (test/emily/io/model_files_test.exs): run them with --include model_files.
ExUnit.start(exclude: [:model_files])

defmodule Emily.Tensor.Type do
  @moduledoc """
  Tensor types and Nx's promotion rules.

  A type is `{kind, bits}`: `{:u, 8..64}`, `{:s, 8..64}`, `{:f, 16 | 32 | 64}`,
  `{:bf, 16}`, `{:c, 64 | 128}`. The short atoms (`:u8`, `:f32`, `:bf16`, ...)
  are accepted wherever a type is. Nx's sub-byte (`u2`, `u4`, `s2`, `s4`)
  and 8-bit float types have no engine representation and raise.

  The rules are Nx's (`Nx.Type`): `merge/2` for two tensors,
  `merge_number/2` for a tensor and an Elixir number, `infer/1` for
  literals, and the `to_*` helpers used by the op families.
  """

  @type t :: {:u | :s | :f | :bf | :c, pos_integer()}

  @types [
    {:u, 8},
    {:u, 16},
    {:u, 32},
    {:u, 64},
    {:s, 8},
    {:s, 16},
    {:s, 32},
    {:s, 64},
    {:f, 16},
    {:bf, 16},
    {:f, 32},
    {:f, 64},
    {:c, 64},
    {:c, 128}
  ]

  @doc "Every supported type."
  def all, do: @types

  @doc """
  Normalises `type` (a tuple or a short atom such as `:f32`) or raises.

      iex> Emily.Tensor.Type.normalize!(:bf16)
      {:bf, 16}
      iex> Emily.Tensor.Type.normalize!({:s, 64})
      {:s, 64}
  """
  def normalize!(type) when type in @types, do: type

  def normalize!(type) when is_atom(type) do
    case Regex.run(~r/^(u|s|f|bf|c)(\d+)$/, Atom.to_string(type)) do
      [_, kind, bits] -> normalize!({String.to_atom(kind), String.to_integer(bits)})
      _ -> raise ArgumentError, "invalid numerical type: #{inspect(type)}"
    end
  end

  def normalize!({kind, bits} = type) when kind in [:u, :s] and bits in [2, 4],
    do: raise(ArgumentError, "type #{inspect(type)} (sub-byte integers) is not supported by Emily")

  def normalize!({:f, 8} = type),
    do: raise(ArgumentError, "type #{inspect(type)} (8-bit floats) is not supported by Emily")

  def normalize!(type),
    do: raise(ArgumentError, "invalid numerical type: #{inspect(type)}")

  @doc "The string Nx prints: `\"f32\"`, `\"bf16\"`, ..."
  def to_string({kind, bits}), do: "#{kind}#{bits}"

  def integer?({kind, _}), do: kind in [:u, :s]
  def float?({kind, _}), do: kind in [:f, :bf]
  def complex?({kind, _}), do: kind == :c
  def unsigned?({kind, _}), do: kind == :u

  @doc "Bytes per element."
  def byte_size({_, bits}), do: div(bits, 8)

  @doc """
  The type of an Elixir literal: integers are s32, floats f32, booleans u8,
  `:nan`/`:infinity`/`:neg_infinity` f32, `Emily.Complex` c64.

      iex> Emily.Tensor.Type.infer(1)
      {:s, 32}
      iex> Emily.Tensor.Type.infer(1.0)
      {:f, 32}
  """
  def infer(x) when is_integer(x), do: {:s, 32}
  def infer(x) when is_float(x), do: {:f, 32}
  def infer(x) when is_boolean(x), do: {:u, 8}
  def infer(x) when x in [:nan, :infinity, :neg_infinity], do: {:f, 32}
  def infer(%Emily.Complex{}), do: {:c, 64}

  def infer(other),
    do: raise(ArgumentError, "cannot infer the numerical type of #{inspect(other)}")

  @doc """
  Promotes two tensor types (Nx's `Nx.Type.merge/2`).

      iex> Emily.Tensor.Type.merge({:u, 8}, {:s, 8})
      {:s, 16}
      iex> Emily.Tensor.Type.merge({:s, 64}, {:f, 32})
      {:f, 32}
      iex> Emily.Tensor.Type.merge({:f, 64}, {:c, 64})
      {:c, 128}
  """
  def merge({kind, a}, {kind, b}), do: {kind, max(a, b)}
  def merge({:u, u}, {:s, s}), do: {:s, max(min(2 * u, 64), s)}
  def merge({:s, s}, {:u, u}), do: {:s, max(min(2 * u, 64), s)}
  def merge({:f, f}, {:c, c}), do: {:c, max(2 * f, c)}
  def merge({:c, c}, {:f, f}), do: {:c, max(2 * f, c)}
  def merge({:bf, 16}, {:c, c}), do: {:c, max(32, c)}
  def merge({:c, c}, {:bf, 16}), do: {:c, max(32, c)}

  def merge(left, right) do
    if rank(left) >= rank(right), do: left, else: right
  end

  defp rank({:c, _}), do: 4
  defp rank({:f, _}), do: 3
  defp rank({:bf, _}), do: 2
  defp rank({:s, _}), do: 1
  defp rank({:u, _}), do: 0

  @doc """
  Promotes a tensor type with an Elixir number, keeping the tensor's type
  where it can (Nx's `Nx.Type.merge_number/2`).

      iex> Emily.Tensor.Type.merge_number({:u, 8}, 256)
      {:u, 16}
      iex> Emily.Tensor.Type.merge_number({:u, 8}, -1)
      {:s, 16}
      iex> Emily.Tensor.Type.merge_number({:s, 32}, 1.0)
      {:f, 32}
      iex> Emily.Tensor.Type.merge_number({:f, 16}, 1.0)
      {:f, 16}
  """
  def merge_number({:u, bits}, n) when is_integer(n) and n >= 0,
    do: {:u, max(unsigned_size(n), bits)}

  def merge_number({:u, bits}, n) when is_integer(n),
    do: merge_number({:s, min(bits * 2, 64)}, n)

  def merge_number({:s, bits}, n) when is_integer(n), do: {:s, max(signed_size(n), bits)}
  def merge_number({kind, _}, n) when kind in [:u, :s] and is_float(n), do: {:f, 32}

  def merge_number({kind, _}, n) when kind in [:u, :s] and n in [:nan, :infinity, :neg_infinity],
    do: {:f, 32}

  def merge_number({:f, 64}, %Emily.Complex{}), do: {:c, 128}
  def merge_number({kind, _}, %Emily.Complex{}) when kind in [:u, :s, :f, :bf], do: {:c, 64}
  def merge_number(type, _number), do: type

  defp unsigned_size(n) when n <= 0xFF, do: 8
  defp unsigned_size(n) when n <= 0xFFFF, do: 16
  defp unsigned_size(n) when n <= 0xFFFFFFFF, do: 32
  defp unsigned_size(_), do: 64

  defp signed_size(n) when n in -0x80..0x7F, do: 8
  defp signed_size(n) when n in -0x8000..0x7FFF, do: 16
  defp signed_size(n) when n in -0x80000000..0x7FFFFFFF, do: 32
  defp signed_size(_), do: 64

  @doc "Integers become f32; floats and complex stay."
  def to_floating({kind, _}) when kind in [:u, :s], do: {:f, 32}
  def to_floating(type), do: type

  @doc "f64 and c128 become c128; everything else c64."
  def to_complex({:f, 64}), do: {:c, 128}
  def to_complex({:c, 128}), do: {:c, 128}
  def to_complex(_), do: {:c, 64}

  @doc "c64 becomes f32, c128 f64, integers f32; floats stay."
  def to_real({:c, 64}), do: {:f, 32}
  def to_real({:c, 128}), do: {:f, 64}
  def to_real({kind, _}) when kind in [:u, :s], do: {:f, 32}
  def to_real(type), do: type

  @doc "The accumulator type of sum and product (Nx's `to_aggregate`)."
  def to_aggregate({:u, 64}), do: {:s, 64}
  def to_aggregate({:u, _}), do: {:u, 32}
  def to_aggregate({:s, 64}), do: {:s, 64}
  def to_aggregate({:s, _}), do: {:s, 32}
  def to_aggregate(type), do: type

  @doc "The smallest and largest finite values of a type, as Elixir numbers."
  def min_finite({:u, _}), do: 0
  def min_finite({:s, bits}), do: -Bitwise.bsl(1, bits - 1)
  def min_finite(type), do: -max_finite(type)

  def max_finite({:u, bits}), do: Bitwise.bsl(1, bits) - 1
  def max_finite({:s, bits}), do: Bitwise.bsl(1, bits - 1) - 1
  def max_finite({:f, 16}), do: 65504.0
  def max_finite({:bf, 16}), do: 3.3895313892515355e38
  def max_finite({:f, 32}), do: 3.4028234663852886e38
  def max_finite({:f, 64}), do: 1.7976931348623157e308
  def max_finite({:c, 64}), do: max_finite({:f, 32})
  def max_finite({:c, 128}), do: max_finite({:f, 64})
end

defmodule Emily.Tensor.Constants do
  @moduledoc """
  Common constants as scalar tensors, like `Nx.Constants`.

  Each function takes a type (as a tuple or a short atom such as `:f16`)
  and options (`:backend`, accepted and ignored). The float constants
  (`pi/0..2`, `e/0..2`, `euler_gamma/0..2`, `nan/0..2`, `infinity/0..2`,
  `neg_infinity/0..2`) default to f32 and raise for other kinds of types;
  `i/0..2` defaults to c64.

  The bf16 values of `e` and `euler_gamma` are the f32 values truncated to
  bf16 (`2.703125`, `0.57421875`), as in Nx.
  """

  alias Emily.Native
  alias Emily.Tensor.{Core, Type}

  # Bit patterns per float type.
  @pi %{
    {:bf, 16} => 0x4049,
    {:f, 16} => 0x4248,
    {:f, 32} => 0x40490FDB,
    {:f, 64} => 0x400921FB54442D18
  }
  @e %{
    {:bf, 16} => 0x402D,
    {:f, 16} => 0x4170,
    {:f, 32} => 0x402DF854,
    {:f, 64} => 0x4005BF0A8B145769
  }
  @euler_gamma %{
    {:bf, 16} => 0x3F13,
    {:f, 16} => 0x389E,
    {:f, 32} => 0x3F13C468,
    {:f, 64} => 0x3FE2788CFC6FB619
  }
  @nan %{
    {:bf, 16} => 0x7FC0,
    {:f, 16} => 0x7E00,
    {:f, 32} => 0x7FC00000,
    {:f, 64} => 0x7FF8000000000000
  }
  @infinity %{
    {:bf, 16} => 0x7F80,
    {:f, 16} => 0x7C00,
    {:f, 32} => 0x7F800000,
    {:f, 64} => 0x7FF0000000000000
  }
  @max_finite %{
    {:bf, 16} => 0x7F7F,
    {:f, 16} => 0x7BFF,
    {:f, 32} => 0x7F7FFFFF,
    {:f, 64} => 0x7FEFFFFFFFFFFFFF
  }
  @smallest_positive_normal %{
    {:bf, 16} => 0x0080,
    {:f, 16} => 0x0400,
    {:f, 32} => 0x00800000,
    {:f, 64} => 0x0010000000000000
  }
  @epsilon %{
    {:bf, 16} => 0x3C00,
    {:f, 16} => 0x1400,
    {:f, 32} => 0x34000000,
    {:f, 64} => 0x3CB0000000000000
  }

  @doc "Returns NaN in f32."
  def nan, do: nan({:f, 32}, [])

  @doc """
  Returns NaN (Not a Number) of a float type.

  ## Examples

      iex> Emily.Tensor.Constants.nan({:f, 16})
      #Emily.Tensor<
        f16
        NaN
      >

      iex> Emily.Tensor.Constants.nan(:bf16)
      #Emily.Tensor<
        bf16
        NaN
      >
  """
  def nan(type, opts \\ []), do: float_constant(@nan, type, opts, 0)

  @doc "Returns infinity in f32."
  def infinity, do: infinity({:f, 32}, [])

  @doc """
  Returns infinity of a float type.

  ## Examples

      iex> Emily.Tensor.Constants.infinity({:f, 64})
      #Emily.Tensor<
        f64
        Inf
      >
  """
  def infinity(type, opts \\ []), do: float_constant(@infinity, type, opts, 0)

  @doc "Returns negative infinity in f32."
  def neg_infinity, do: neg_infinity({:f, 32}, [])

  @doc """
  Returns negative infinity of a float type.

  ## Examples

      iex> Emily.Tensor.Constants.neg_infinity({:bf, 16})
      #Emily.Tensor<
        bf16
        -Inf
      >
  """
  def neg_infinity(type, opts \\ []), do: float_constant(@infinity, type, opts, 1)

  @doc """
  Returns the largest finite value of a type.

  ## Examples

      iex> Emily.Tensor.Constants.max_finite({:u, 8})
      #Emily.Tensor<
        u8
        255
      >

      iex> Emily.Tensor.Constants.max_finite({:s, 16})
      #Emily.Tensor<
        s16
        32767
      >

      iex> Emily.Tensor.Constants.max_finite({:f, 32})
      #Emily.Tensor<
        f32
        3.4028235e38
      >

      iex> Emily.Tensor.Constants.max_finite({:f, 16})
      #Emily.Tensor<
        f16
        6.55e4
      >
  """
  def max_finite(type, opts \\ []), do: finite(type, opts, 0)

  @doc """
  Returns the smallest (most negative) finite value of a type.

  ## Examples

      iex> Emily.Tensor.Constants.min_finite({:u, 8})
      #Emily.Tensor<
        u8
        0
      >

      iex> Emily.Tensor.Constants.min_finite({:s, 16})
      #Emily.Tensor<
        s16
        -32768
      >

      iex> Emily.Tensor.Constants.min_finite({:f, 32})
      #Emily.Tensor<
        f32
        -3.4028235e38
      >
  """
  def min_finite(type, opts \\ []), do: finite(type, opts, 1)

  @doc """
  Returns the largest value of a type: infinity for float types.

  ## Examples

      iex> Emily.Tensor.Constants.max({:u, 8})
      #Emily.Tensor<
        u8
        255
      >

      iex> Emily.Tensor.Constants.max({:f, 32})
      #Emily.Tensor<
        f32
        Inf
      >
  """
  def max(type, opts \\ []) do
    type = Type.normalize!(type)
    if Type.float?(type), do: infinity(type, opts), else: max_finite(type, opts)
  end

  @doc """
  Returns the smallest value of a type: negative infinity for float types.

  ## Examples

      iex> Emily.Tensor.Constants.min({:s, 8})
      #Emily.Tensor<
        s8
        -128
      >

      iex> Emily.Tensor.Constants.min({:f, 32})
      #Emily.Tensor<
        f32
        -Inf
      >
  """
  def min(type, opts \\ []) do
    type = Type.normalize!(type)
    if Type.float?(type), do: neg_infinity(type, opts), else: min_finite(type, opts)
  end

  @doc """
  Returns the smallest positive normal value of a float type.

  ## Examples

      iex> Emily.Tensor.Constants.smallest_positive_normal({:f, 64})
      #Emily.Tensor<
        f64
        2.2250738585072014e-308
      >

      iex> Emily.Tensor.Constants.smallest_positive_normal({:f, 32})
      #Emily.Tensor<
        f32
        1.1754944e-38
      >

      iex> Emily.Tensor.Constants.smallest_positive_normal({:f, 16})
      #Emily.Tensor<
        f16
        6.104e-5
      >

      iex> Emily.Tensor.Constants.smallest_positive_normal({:s, 32})
      ** (ArgumentError) only floating types are supported, got: {:s, 32}
  """
  def smallest_positive_normal(type, opts \\ []),
    do: float_constant(@smallest_positive_normal, type, opts, 0)

  @doc """
  Returns the machine epsilon of a float type (the distance from 1.0 to
  the next larger value).

  ## Examples

      iex> Emily.Tensor.Constants.epsilon({:f, 64})
      #Emily.Tensor<
        f64
        2.220446049250313e-16
      >

      iex> Emily.Tensor.Constants.epsilon({:f, 32})
      #Emily.Tensor<
        f32
        1.1920929e-7
      >

      iex> Emily.Tensor.Constants.epsilon({:f, 16})
      #Emily.Tensor<
        f16
        9.77e-4
      >
  """
  def epsilon(type, opts \\ []), do: float_constant(@epsilon, type, opts, 0)

  @doc "Returns π in f32."
  def pi, do: pi({:f, 32}, [])

  @doc ~S"""
  Returns π for a float type.

  ## Examples

      iex> Emily.Tensor.Constants.pi({:f, 64})
      #Emily.Tensor<
        f64
        3.141592653589793
      >

      iex> Emily.Tensor.Constants.pi({:f, 32})
      #Emily.Tensor<
        f32
        3.1415927
      >

      iex> Emily.Tensor.Constants.pi({:f, 16})
      #Emily.Tensor<
        f16
        3.14
      >

      iex> Emily.Tensor.Constants.pi({:s, 32})
      ** (ArgumentError) only floating types are supported, got: {:s, 32}
  """
  def pi(type, opts \\ []), do: float_constant(@pi, type, opts, 0)

  @doc "Returns e in f32."
  def e, do: e({:f, 32}, [])

  @doc """
  Returns e (Euler's number) for a float type.

  ## Examples

      iex> Emily.Tensor.Constants.e({:f, 64})
      #Emily.Tensor<
        f64
        2.718281828459045
      >

      iex> Emily.Tensor.Constants.e({:f, 32})
      #Emily.Tensor<
        f32
        2.7182817
      >

      iex> Emily.Tensor.Constants.e({:bf, 16})
      #Emily.Tensor<
        bf16
        2.7
      >
  """
  def e(type, opts \\ []), do: float_constant(@e, type, opts, 0)

  @doc "Returns γ (the Euler–Mascheroni constant) in f32."
  def euler_gamma, do: euler_gamma({:f, 32}, [])

  @doc """
  Returns γ (the Euler–Mascheroni constant) for a float type.

  ## Examples

      iex> Emily.Tensor.Constants.euler_gamma({:f, 64})
      #Emily.Tensor<
        f64
        0.5772156649015329
      >

      iex> Emily.Tensor.Constants.euler_gamma({:f, 32})
      #Emily.Tensor<
        f32
        0.5772157
      >
  """
  def euler_gamma(type, opts \\ []), do: float_constant(@euler_gamma, type, opts, 0)

  @doc """
  Returns the imaginary unit `i` of a complex type (default c64). The
  type may also be given as `type: ...` in a keyword list.

  ## Examples

      iex> Emily.Tensor.Constants.i()
      #Emily.Tensor<
        c64
        0.0+1.0i
      >

      iex> Emily.Tensor.Constants.i({:c, 128})
      #Emily.Tensor<
        c128
        0.0+1.0i
      >

      iex> Emily.Tensor.Constants.i({:f, 32})
      ** (ArgumentError) invalid type for complex number. Expected {:c, 64} or {:c, 128}, got: {:f, 32}
  """
  def i(type \\ {:c, 64}, opts \\ [])

  def i(opts, []) when is_list(opts) do
    opts = Core.options!(opts, backend: nil, names: nil, type: {:c, 64})
    i(opts[:type], [])
  end

  def i(type, opts) do
    Core.options!(opts, backend: nil)
    type = Type.normalize!(type)

    unless Type.complex?(type) do
      raise ArgumentError,
            "invalid type for complex number. Expected {:c, 64} or {:c, 128}, got: #{inspect(type)}"
    end

    Core.to_tensor(Emily.Complex.new(0.0, 1.0), type)
  end

  defp float_constant(table, type, opts, sign) do
    Core.options!(opts, backend: nil)
    {_, bits} = type = Type.normalize!(type)

    case table do
      %{^type => pattern} ->
        pattern = Bitwise.bor(pattern, Bitwise.bsl(sign, bits - 1))
        Core.wrap(Native.scalar(<<pattern::size(bits)-native>>, type))

      _ ->
        raise ArgumentError, "only floating types are supported, got: #{inspect(type)}"
    end
  end

  defp finite(type, opts, sign) do
    type = Type.normalize!(type)

    cond do
      Type.integer?(type) ->
        Core.options!(opts, backend: nil)
        value = if sign == 0, do: Type.max_finite(type), else: Type.min_finite(type)
        Core.to_tensor(value, type)

      Type.float?(type) ->
        float_constant(@max_finite, type, opts, sign)

      true ->
        raise ArgumentError, "only real types are supported, got: #{inspect(type)}"
    end
  end
end

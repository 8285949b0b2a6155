defmodule Emily.Tensor.Elementwise do
  @moduledoc """
  Element-wise functions of `Emily.Tensor` with Nx's semantics: unary math,
  rounding and sign, complex parts, bit counts, binary arithmetic,
  comparisons, logical and bitwise operations, `select/3` and `clip/3`.

  Every function is delegated from `Emily.Tensor`; call them there. Each
  argument may be a tensor or a number (an integer, a float, `:nan`,
  `:infinity`, `:neg_infinity` or an `Emily.Complex`).

  ## Types

  Binary functions promote like Nx: two tensors with `Emily.Tensor.Type.merge/2`,
  a tensor and a number with `Emily.Tensor.Type.merge_number/2` (the tensor's
  type is kept where the number fits), two numbers by their inferred types.
  The math functions (`exp/1` ... `erf_inv/1`), `divide/2`, `atan2/2` and the
  logarithms return floats (integers become f32). Comparisons, logical
  functions, `is_nan/1` and `is_infinity/1` return u8.

  ## Edge semantics (as Nx's binary backend, IEEE for floats)

  Integer overflow wraps; `quotient/2` truncates toward zero and
  `remainder/2` has the sign of the dividend; `round/1` rounds half away
  from zero. Where Nx raises on data (integer division by zero, a negative
  integer exponent or shift count) the engine cannot, as it is lazy: an
  integer divided by zero gives 0, a negative exponent gives 0 (except for
  bases 1 and -1), and a shift by a negative or too large count gives 0
  (-1 for an arithmetic right shift of a negative value).
  """

  import Kernel, except: [abs: 1, floor: 1, ceil: 1, round: 1, max: 2, min: 2]

  alias Emily.Native
  alias Emily.Tensor.{Core, Type}

  @typep tensor :: Emily.Tensor.t()
  @typep tensor_or_number :: Emily.Tensor.t() | number() | atom() | Emily.Complex.t()

  # ---------------------------------------------------------------------------
  # Unary math: the output type is to_floating(input)
  # ---------------------------------------------------------------------------

  # {name, what it computes, example input, example output (as printed)}
  @math [
    {:exp, "the exponential", "[1.0, 2.0, 3.0]", "f32[3]", "[2.7182817, 7.389056, 20.085537]"},
    {:expm1, "the exponential minus one", "[1.0, 2.0, 3.0]", "f32[3]",
     "[1.7182817, 6.389056, 19.085537]"},
    {:log, "the natural logarithm", "[1.0, 2.0, 3.0]", "f32[3]", "[0.0, 0.6931472, 1.0986123]"},
    {:log1p, "the natural logarithm of one plus the argument", "[1.0, 2.0, 3.0]", "f32[3]",
     "[0.6931472, 1.0986123, 1.3862944]"},
    {:sigmoid, "the logistic function 1 / (1 + exp(-x))", "[1.0, 2.0, 3.0]", "f32[3]",
     "[0.7310586, 0.880797, 0.95257413]"},
    {:cos, "the cosine", "[1.0, 2.0, 3.0]", "f32[3]", "[0.5403023, -0.41614684, -0.9899925]"},
    {:sin, "the sine", "[1.0, 2.0, 3.0]", "f32[3]", "[0.84147096, 0.9092974, 0.14112]"},
    {:tan, "the tangent", "[1.0, 2.0, 3.0]", "f32[3]", "[1.5574077, -2.1850398, -0.14254655]"},
    {:cosh, "the hyperbolic cosine", "[1.0, 2.0, 3.0]", "f32[3]",
     "[1.5430806, 3.7621958, 10.067662]"},
    {:sinh, "the hyperbolic sine", "[1.0, 2.0, 3.0]", "f32[3]",
     "[1.1752012, 3.6268604, 10.017875]"},
    {:tanh, "the hyperbolic tangent", "[1.0, 2.0, 3.0]", "f32[3]",
     "[0.7615942, 0.9640276, 0.9950548]"},
    {:acos, "the inverse cosine", "[0.10000000149011612, 0.5, 0.8999999761581421]", "f32[3]",
     "[1.4706289, 1.0471976, 0.45102686]"},
    {:asin, "the inverse sine", "[0.10000000149011612, 0.5, 0.8999999761581421]", "f32[3]",
     "[0.10016742, 0.5235988, 1.1197695]"},
    {:atan, "the inverse tangent", "[0.10000000149011612, 0.5, 0.8999999761581421]", "f32[3]",
     "[0.09966865, 0.4636476, 0.7328151]"},
    {:acosh, "the inverse hyperbolic cosine", "[1.0, 2.0, 3.0]", "f32[3]",
     "[0.0, 1.316958, 1.7627472]"},
    {:asinh, "the inverse hyperbolic sine", "[1.0, 2.0, 3.0]", "f32[3]",
     "[0.8813736, 1.4436355, 1.8184465]"},
    {:atanh, "the inverse hyperbolic tangent", "[0.10000000149011612, 0.5, 0.8999999761581421]",
     "f32[3]", "[0.100335345, 0.54930615, 1.4722193]"},
    {:sqrt, "the square root", "[1.0, 2.0, 3.0]", "f32[3]", "[1.0, 1.4142135, 1.7320508]"},
    {:rsqrt, "the reciprocal square root", "[1.0, 2.0, 3.0]", "f32[3]",
     "[1.0, 0.70710677, 0.57735026]"},
    {:cbrt, "the cube root", "[1.0, 2.0, 3.0]", "f32[3]", "[1.0, 1.2599211, 1.4422495]"},
    {:erf, "the error function", "[1.0, 2.0, 3.0]", "f32[3]",
     "[0.8427008, 0.9953223, 0.9999779]"},
    {:erfc, "the complementary error function", "[1.0, 2.0, 3.0]", "f32[3]",
     "[0.1572992, 0.0046777353, 2.2090497e-5]"},
    {:erf_inv, "the inverse error function", "[0.25, 0.5, 0.75]", "f32[3]",
     "[0.22531205, 0.47693628, 0.8134198]"}
  ]

  @real_only [:erf, :erfc, :erf_inv]

  for {name, what, input, header, output} <- @math do
    complex_note =
      if name in @real_only,
        do: "Complex inputs raise.",
        else: "Complex inputs are supported."

    @doc """
    Computes #{what} of each element.

    Integer inputs are converted to f32 first; floats and complex keep their
    type. #{complex_note}

    ## Examples

        iex> Emily.Tensor.#{name}(Emily.Tensor.tensor(#{input}))
        #Emily.Tensor<
          #{header}
          #{output}
        >
    """
    @spec unquote(name)(tensor_or_number) :: tensor
    def unquote(name)(tensor) do
      t = Core.to_tensor(tensor)
      if unquote(name in @real_only), do: assert_not_complex!(t.type, unquote(name), 1)
      t = Core.cast(t, Type.to_floating(t.type))
      Core.wrap(Native.unquote(name)(t.ref))
    end
  end

  @doc """
  The logarithm of each element in `base`, computed as
  `divide(log(tensor), log(base))`. A numeric base must be positive and
  different from 1.

  ## Examples

      iex> Emily.Tensor.log(Emily.Tensor.tensor([1.0, 10.0, 100.0]), 10)
      #Emily.Tensor<
        f32[3]
        [0.0, 1.0, 2.0]
      >

      iex> Emily.Tensor.log(8, 0)
      ** (ArgumentError) expected base to be greater than 0 and different than 1, got: 0
  """
  @spec log(tensor_or_number, tensor_or_number) :: tensor
  def log(tensor, base) do
    if is_number(base) and (base <= 0 or base == 1) do
      raise ArgumentError,
            "expected base to be greater than 0 and different than 1, got: #{inspect(base)}"
    end

    t = log(tensor)
    divide(t, log(Core.to_tensor(base, base_type(base, t.type))))
  end

  # A numeric base is taken in the argument's float type (so that f64
  # logarithms divide by an f64 constant).
  defp base_type(base, type) when is_number(base), do: Type.to_real(type)
  defp base_type(_base, _type), do: nil

  @doc """
  The base-2 logarithm of each element (`log(tensor, 2)`).

  ## Examples

      iex> Emily.Tensor.log2(Emily.Tensor.tensor([1, 2, 8]))
      #Emily.Tensor<
        f32[3]
        [0.0, 1.0, 3.0]
      >
  """
  @spec log2(tensor_or_number) :: tensor
  def log2(tensor), do: log(tensor, 2)

  @doc """
  The base-10 logarithm of each element (`log(tensor, 10)`).

  ## Examples

      iex> Emily.Tensor.log10(Emily.Tensor.tensor([1.0, 10.0, 1000.0]))
      #Emily.Tensor<
        f32[3]
        [0.0, 1.0, 3.0]
      >
  """
  @spec log10(tensor_or_number) :: tensor
  def log10(tensor), do: log(tensor, 10)

  # ---------------------------------------------------------------------------
  # Unary: sign, rounding, predicates, bits
  # ---------------------------------------------------------------------------

  @doc """
  Negates each element. Integers wrap (negating the smallest signed value
  gives itself; unsigned values wrap modulo 2^bits).

  ## Examples

      iex> Emily.Tensor.negate(Emily.Tensor.tensor([1, 2, -3]))
      #Emily.Tensor<
        s32[3]
        [-1, -2, 3]
      >

      iex> Emily.Tensor.negate(Emily.Tensor.tensor([0, 1, 2], type: :u8))
      #Emily.Tensor<
        u8[3]
        [0, 255, 254]
      >
  """
  @spec negate(tensor_or_number) :: tensor
  def negate(tensor), do: unary_same(tensor, :negate)

  @doc """
  The sign of each element: -1, 0 or 1 (floats keep the sign of zero and
  NaN; a complex number gives `z / |z|`).

  ## Examples

      iex> Emily.Tensor.sign(Emily.Tensor.tensor([-2, -1, 0, 1, 2]))
      #Emily.Tensor<
        s32[5]
        [-1, -1, 0, 1, 1]
      >
  """
  @spec sign(tensor_or_number) :: tensor
  def sign(tensor), do: unary_same(tensor, :sign)

  @doc """
  The absolute value of each element. Unsigned integers are unchanged;
  complex numbers give their magnitude, in the real type (c64 gives f32).

  ## Examples

      iex> Emily.Tensor.abs(Emily.Tensor.tensor([-2, -1, 0, 1, 2]))
      #Emily.Tensor<
        s32[5]
        [2, 1, 0, 1, 2]
      >

      iex> Emily.Tensor.abs(Emily.Tensor.tensor([Emily.Complex.new(3, 4)]))
      #Emily.Tensor<
        f32[1]
        [5.0]
      >
  """
  @spec abs(tensor_or_number) :: tensor
  def abs(tensor) do
    t = Core.to_tensor(tensor)
    if Type.unsigned?(t.type), do: t, else: Core.wrap(Native.abs(t.ref))
  end

  for {name, what} <- [
        floor: "the largest integer not above",
        ceil: "the smallest integer not below",
        round: "the nearest integer to (halves away from zero)"
      ] do
    @doc """
    Rounds each element to #{what} it. The identity on integers; complex
    inputs raise.

    ## Examples

        iex> Emily.Tensor.#{name}(Emily.Tensor.tensor([-1.5, -0.5, 0.5, 1.5]))
        #Emily.Tensor<
          f32[4]
          #{%{floor: "[-2.0, -1.0, 0.0, 1.0]", ceil: "[-1.0, -0.0, 1.0, 2.0]", round: "[-2.0, -1.0, 1.0, 2.0]"}[name]}
        >
    """
    @spec unquote(name)(tensor_or_number) :: tensor
    def unquote(name)(tensor) do
      t = Core.to_tensor(tensor)
      assert_not_complex!(t.type, unquote(name), 1)
      if Type.integer?(t.type), do: t, else: Core.wrap(Native.unquote(name)(t.ref))
    end
  end

  @doc """
  1 (u8) where the element is NaN (a complex number when either part is),
  0 elsewhere. Integers are never NaN.

  ## Examples

      iex> Emily.Tensor.is_nan(Emily.Tensor.tensor([:nan, 1.0, :infinity]))
      #Emily.Tensor<
        u8[3]
        [1, 0, 0]
      >
  """
  @spec is_nan(tensor_or_number) :: tensor
  def is_nan(tensor), do: unary_same(tensor, :is_nan)

  @doc """
  1 (u8) where the element is an infinity of either sign (a complex number
  when either part is), 0 elsewhere.

  ## Examples

      iex> Emily.Tensor.is_infinity(Emily.Tensor.tensor([:infinity, :neg_infinity, :nan, 0.0]))
      #Emily.Tensor<
        u8[4]
        [1, 1, 0, 0]
      >
  """
  @spec is_infinity(tensor_or_number) :: tensor
  def is_infinity(tensor), do: unary_same(tensor, :is_infinity)

  @doc """
  1 (u8) where the element is zero, 0 elsewhere (NaN counts as non-zero).

  ## Examples

      iex> Emily.Tensor.logical_not(Emily.Tensor.tensor([0, 1, 2]))
      #Emily.Tensor<
        u8[3]
        [1, 0, 0]
      >
  """
  @spec logical_not(tensor_or_number) :: tensor
  def logical_not(tensor), do: unary_same(tensor, :logical_not)

  @doc """
  The bitwise complement of each element. Integers only.

  ## Examples

      iex> Emily.Tensor.bitwise_not(Emily.Tensor.tensor([-1, 0, 1]))
      #Emily.Tensor<
        s32[3]
        [0, -1, -2]
      >

      iex> Emily.Tensor.bitwise_not(Emily.Tensor.tensor([0, 1, 254, 255], type: :u8))
      #Emily.Tensor<
        u8[4]
        [255, 254, 1, 0]
      >

      iex> Emily.Tensor.bitwise_not(Emily.Tensor.tensor([1.0]))
      ** (ArgumentError) bitwise operators expect integer tensors as inputs and outputs an integer tensor, got: {:f, 32}
  """
  @spec bitwise_not(tensor_or_number) :: tensor
  def bitwise_not(tensor), do: unary_integer(tensor, :bitwise_not)

  @doc """
  The number of set bits of each element, in its type's width. Integers
  only.

  ## Examples

      iex> Emily.Tensor.population_count(Emily.Tensor.tensor([0, 1, 7, -1], type: :s8))
      #Emily.Tensor<
        s8[4]
        [0, 1, 3, 8]
      >
  """
  @spec population_count(tensor_or_number) :: tensor
  def population_count(tensor), do: unary_integer(tensor, :population_count)

  @doc """
  The number of leading zero bits of each element, in its type's width
  (zero gives the width). Integers only.

  ## Examples

      iex> Emily.Tensor.count_leading_zeros(Emily.Tensor.tensor([0, 1, 255, 256], type: :u16))
      #Emily.Tensor<
        u16[4]
        [16, 15, 8, 7]
      >
  """
  @spec count_leading_zeros(tensor_or_number) :: tensor
  def count_leading_zeros(tensor), do: unary_integer(tensor, :count_leading_zeros)

  # ---------------------------------------------------------------------------
  # Complex parts
  # ---------------------------------------------------------------------------

  @doc """
  The complex conjugate of each element. The output is complex
  (`Emily.Tensor.Type.to_complex/1`: f64 gives c128, other types c64).

  ## Examples

      iex> Emily.Tensor.conjugate(Emily.Tensor.tensor([Emily.Complex.new(1, 2), Emily.Complex.new(3, -4)]))
      #Emily.Tensor<
        c64[2]
        [1.0-2.0i, 3.0+4.0i]
      >

      iex> Emily.Tensor.conjugate(Emily.Tensor.tensor([1, 2]))
      #Emily.Tensor<
        c64[2]
        [1.0-0.0i, 2.0-0.0i]
      >
  """
  @spec conjugate(tensor_or_number) :: tensor
  def conjugate(tensor) do
    t = Core.to_tensor(tensor)
    t = Core.cast(t, Type.to_complex(t.type))
    Core.wrap(Native.conjugate(t.ref))
  end

  @doc """
  The real part of each element, in the real type (c64 gives f32, c128
  f64). Real tensors are returned as they are (integers as f32).

  ## Examples

      iex> Emily.Tensor.real(Emily.Tensor.tensor([Emily.Complex.new(1, 2), Emily.Complex.new(3, -4)]))
      #Emily.Tensor<
        f32[2]
        [1.0, 3.0]
      >
  """
  @spec real(tensor_or_number) :: tensor
  def real(tensor) do
    t = Core.to_tensor(tensor)

    if Type.complex?(t.type),
      do: Core.wrap(Native.real(t.ref)),
      else: Core.cast(t, Type.to_real(t.type))
  end

  @doc """
  The imaginary part of each element, in the real type (c64 gives f32,
  c128 f64). Real tensors give zeros (of f32 for integers).

  ## Examples

      iex> Emily.Tensor.imag(Emily.Tensor.tensor([Emily.Complex.new(1, 2), Emily.Complex.new(3, -4)]))
      #Emily.Tensor<
        f32[2]
        [2.0, -4.0]
      >

      iex> Emily.Tensor.imag(Emily.Tensor.tensor([1.5, 2.5]))
      #Emily.Tensor<
        f32[2]
        [0.0, 0.0]
      >
  """
  @spec imag(tensor_or_number) :: tensor
  def imag(tensor) do
    t = Core.to_tensor(tensor)
    t = if Type.complex?(t.type), do: t, else: Core.cast(t, Type.to_real(t.type))
    Core.wrap(Native.imag(t.ref))
  end

  @doc """
  The phase (argument) of each element, `atan2(imag, real)`, in the real
  type. Real inputs give 0 for non-negative values and pi for negative
  ones.

  ## Examples

      iex> Emily.Tensor.phase(Emily.Tensor.tensor([Emily.Complex.new(1, 0), Emily.Complex.new(0, 1), Emily.Complex.new(-1, 0)]))
      #Emily.Tensor<
        f32[3]
        [0.0, 1.5707964, 3.1415927]
      >

      iex> Emily.Tensor.phase(Emily.Tensor.tensor([1.0, -2.0]))
      #Emily.Tensor<
        f32[2]
        [0.0, 3.1415927]
      >
  """
  @spec phase(tensor_or_number) :: tensor
  def phase(tensor) do
    t = Core.to_tensor(tensor)
    re = real(t)
    im = imag(t)
    Core.wrap(Native.atan2(im.ref, re.ref))
  end

  @doc """
  Builds complex numbers `real + imag·i` from two real tensors (or
  numbers), broadcasting them. The type is
  `to_complex(merge(real, imag))`; complex arguments raise.

  ## Examples

      iex> Emily.Tensor.complex(Emily.Tensor.tensor([1.0, 2.0]), Emily.Tensor.tensor([3.0, -4.0]))
      #Emily.Tensor<
        c64[2]
        [1.0+3.0i, 2.0-4.0i]
      >

      iex> Emily.Tensor.complex(Emily.Tensor.tensor([1.0], type: :f64), 2)
      #Emily.Tensor<
        c128[1]
        [1.0+2.0i]
      >
  """
  @spec complex(tensor_or_number, tensor_or_number) :: tensor
  def complex(real, imag) do
    real = operand!(real)
    imag = operand!(imag)

    for x <- [real, imag], Type.complex?(Core.type_of(x)) do
      raise ArgumentError,
            "Emily.Tensor.complex/2 expects real tensors, got: #{inspect(Core.type_of(x))}"
    end

    type = Type.merge(Core.type_of(real), Core.type_of(imag)) |> Type.to_complex()
    re = Core.to_tensor(real, type)
    im = Core.to_tensor(imag, type)
    i = Core.to_tensor(Emily.Complex.new(0.0, 1.0), type)
    Core.wrap(Native.add(re.ref, Native.multiply(im.ref, i.ref)))
  end

  # ---------------------------------------------------------------------------
  # Binary arithmetic
  # ---------------------------------------------------------------------------

  @doc """
  Element-wise addition with broadcasting. Integer overflow wraps.

  ## Examples

      iex> Emily.Tensor.add(1, 2)
      #Emily.Tensor<
        s32
        3
      >

      iex> Emily.Tensor.add(Emily.Tensor.tensor([1, 2, 3]), 1.0)
      #Emily.Tensor<
        f32[3]
        [2.0, 3.0, 4.0]
      >

      iex> Emily.Tensor.add(Emily.Tensor.tensor([1, 2, 3], type: :u8), Emily.Tensor.tensor([1, 2, 3], type: :s8))
      #Emily.Tensor<
        s16[3]
        [2, 4, 6]
      >

      iex> Emily.Tensor.add(Emily.Tensor.tensor([[1], [2]]), Emily.Tensor.tensor([10, 20]))
      #Emily.Tensor<
        s32[2][2]
        [
          [11, 21],
          [12, 22]
        ]
      >

      iex> Emily.Tensor.add(Emily.Tensor.tensor([127], type: :s8), 1)
      #Emily.Tensor<
        s8[1]
        [-128]
      >
  """
  @spec add(tensor_or_number, tensor_or_number) :: tensor
  def add(left, right), do: binary(left, right, :add, :add)

  @doc """
  Element-wise subtraction with broadcasting. Integer overflow wraps.

  ## Examples

      iex> Emily.Tensor.subtract(Emily.Tensor.tensor([1, 2, 3], type: :u8), 4)
      #Emily.Tensor<
        u8[3]
        [253, 254, 255]
      >

      iex> Emily.Tensor.subtract(Emily.Tensor.tensor([1.5, 2.5]), Emily.Tensor.tensor([1, 2]))
      #Emily.Tensor<
        f32[2]
        [0.5, 0.5]
      >
  """
  @spec subtract(tensor_or_number, tensor_or_number) :: tensor
  def subtract(left, right), do: binary(left, right, :subtract, :subtract)

  @doc """
  Element-wise multiplication with broadcasting. Integer overflow wraps.

  ## Examples

      iex> Emily.Tensor.multiply(Emily.Tensor.tensor([1, 2, 3]), Emily.Tensor.tensor([[1], [2]]))
      #Emily.Tensor<
        s32[2][3]
        [
          [1, 2, 3],
          [2, 4, 6]
        ]
      >

      iex> Emily.Tensor.multiply(Emily.Tensor.tensor([100], type: :u8), 3)
      #Emily.Tensor<
        u8[1]
        [44]
      >
  """
  @spec multiply(tensor_or_number, tensor_or_number) :: tensor
  def multiply(left, right), do: binary(left, right, :multiply, :multiply)

  @doc """
  Element-wise power. Integer powers are exact and wrap; an integer base
  with a negative integer exponent gives 0 (Nx raises).

  ## Examples

      iex> Emily.Tensor.pow(Emily.Tensor.tensor([1, 2, 3]), 2)
      #Emily.Tensor<
        s32[3]
        [1, 4, 9]
      >

      iex> Emily.Tensor.pow(2, Emily.Tensor.tensor([0.5, -1.0]))
      #Emily.Tensor<
        f32[2]
        [1.4142135, 0.5]
      >
  """
  @spec pow(tensor_or_number, tensor_or_number) :: tensor
  def pow(left, right), do: binary(left, right, :pow, :pow)

  @doc """
  Element-wise remainder of the truncating division: the result has the
  sign of the dividend (C's `%` and `fmod`). Complex inputs raise.

  ## Examples

      iex> Emily.Tensor.remainder(Emily.Tensor.tensor([-11, 11]), 10)
      #Emily.Tensor<
        s32[2]
        [-1, 1]
      >

      iex> Emily.Tensor.remainder(Emily.Tensor.tensor([-11], type: :s8), Emily.Tensor.tensor([10], type: :u8))
      #Emily.Tensor<
        s16[1]
        [-1]
      >

      iex> Emily.Tensor.remainder(Emily.Tensor.tensor([5.5, -5.5]), 2)
      #Emily.Tensor<
        f32[2]
        [1.5, -1.5]
      >
  """
  @spec remainder(tensor_or_number, tensor_or_number) :: tensor
  def remainder(left, right), do: binary(left, right, :remainder, :remainder, :real)

  @doc """
  Element-wise division. The output is always floating (integers are
  divided as f32); division by zero follows IEEE.

  ## Examples

      iex> Emily.Tensor.divide(1, 2)
      #Emily.Tensor<
        f32
        0.5
      >

      iex> Emily.Tensor.divide(Emily.Tensor.tensor([1, 2, 3]), Emily.Tensor.tensor([2, 0, -2]))
      #Emily.Tensor<
        f32[3]
        [0.5, Inf, -1.5]
      >
  """
  @spec divide(tensor_or_number, tensor_or_number) :: tensor
  def divide(left, right), do: binary(left, right, :divide, :divide, :floating)

  @doc """
  Element-wise integer division truncating toward zero. Integers only
  (division by zero gives 0).

  ## Examples

      iex> Emily.Tensor.quotient(Emily.Tensor.tensor([11, -11, 7]), 2)
      #Emily.Tensor<
        s32[3]
        [5, -5, 3]
      >

      iex> Emily.Tensor.quotient(10.0, 2)
      ** (ArgumentError) quotient expects integer tensors as inputs and outputs an integer tensor, got: {:f, 32}
  """
  @spec quotient(tensor_or_number, tensor_or_number) :: tensor
  def quotient(left, right), do: binary(left, right, :quotient, :quotient, :integer)

  @doc """
  Element-wise arc tangent of `left / right`, using the signs of both to
  pick the quadrant. The output is floating; complex inputs raise.

  ## Examples

      iex> Emily.Tensor.atan2(Emily.Tensor.tensor([1.0, 1.0, -1.0]), Emily.Tensor.tensor([1.0, -1.0, -1.0]))
      #Emily.Tensor<
        f32[3]
        [0.7853982, 2.3561945, -2.3561945]
      >
  """
  @spec atan2(tensor_or_number, tensor_or_number) :: tensor
  def atan2(left, right), do: binary(left, right, :atan2, :atan2, :floating_real)

  @doc """
  Element-wise maximum. NaN propagates; complex inputs raise.

  ## Examples

      iex> Emily.Tensor.max(Emily.Tensor.tensor([1, 5, 3]), Emily.Tensor.tensor([4, 2, 6]))
      #Emily.Tensor<
        s32[3]
        [4, 5, 6]
      >

      iex> Emily.Tensor.max(Emily.Tensor.tensor([1.0, :nan]), 2)
      #Emily.Tensor<
        f32[2]
        [2.0, NaN]
      >
  """
  @spec max(tensor_or_number, tensor_or_number) :: tensor
  def max(left, right), do: binary(left, right, :max, :maximum, :real)

  @doc """
  Element-wise minimum. NaN propagates; complex inputs raise.

  ## Examples

      iex> Emily.Tensor.min(Emily.Tensor.tensor([1, 5, 3]), Emily.Tensor.tensor([4, 2, 6]))
      #Emily.Tensor<
        s32[3]
        [1, 2, 3]
      >
  """
  @spec min(tensor_or_number, tensor_or_number) :: tensor
  def min(left, right), do: binary(left, right, :min, :minimum, :real)

  # ---------------------------------------------------------------------------
  # Bitwise
  # ---------------------------------------------------------------------------

  @bitwise_docs %{
    bitwise_and:
      {"bitwise AND", "Emily.Tensor.bitwise_and(Emily.Tensor.tensor([0, 1, 2]), 3)", "s32[3]",
       "[0, 1, 2]"},
    bitwise_or:
      {"bitwise OR", "Emily.Tensor.bitwise_or(Emily.Tensor.tensor([0, 1, 2]), 4)", "s32[3]",
       "[4, 5, 6]"},
    bitwise_xor:
      {"bitwise XOR", "Emily.Tensor.bitwise_xor(Emily.Tensor.tensor([0, 1, 2]), 1)", "s32[3]",
       "[1, 0, 3]"},
    left_shift:
      {"left shift (a count of the width or more gives 0)",
       "Emily.Tensor.left_shift(Emily.Tensor.tensor([1, 1, -1]), Emily.Tensor.tensor([1, 4, 2]))",
       "s32[3]", "[2, 16, -4]"},
    right_shift:
      {"right shift, arithmetic on signed types and logical on unsigned ones",
       "Emily.Tensor.right_shift(Emily.Tensor.tensor([16, -16, 7]), Emily.Tensor.tensor([2, 2, 1]))",
       "s32[3]", "[4, -4, 3]"}
  }

  for name <- [:bitwise_and, :bitwise_or, :bitwise_xor, :left_shift, :right_shift] do
    {what, call, header, output} = @bitwise_docs[name]

    @doc """
    Element-wise #{what}, with broadcasting. Integers only: float or
    complex inputs raise.

    ## Examples

        iex> #{call}
        #Emily.Tensor<
          #{header}
          #{output}
        >
    """
    @spec unquote(name)(tensor_or_number, tensor_or_number) :: tensor
    def unquote(name)(left, right),
      do: binary(left, right, unquote(name), unquote(name), :bitwise)
  end

  # ---------------------------------------------------------------------------
  # Comparisons and logical
  # ---------------------------------------------------------------------------

  @comparisons [
    equal: {"==", "[1, 0, 0]"},
    not_equal: {"!=", "[0, 1, 1]"},
    greater: {">", "[0, 0, 1]"},
    less: {"<", "[0, 1, 0]"},
    greater_equal: {">=", "[1, 0, 1]"},
    less_equal: {"<=", "[1, 1, 0]"}
  ]

  for {name, {op, output}} <- @comparisons do
    ordered = name not in [:equal, :not_equal]

    @doc """
    Element-wise `left #{op} right` with broadcasting: 1 (u8) where it
    holds, 0 elsewhere. Comparisons with NaN are false#{if name == :not_equal, do: " (not_equal: true)", else: ""}.#{if ordered, do: " Complex inputs raise.", else: ""}

    ## Examples

        iex> Emily.Tensor.#{name}(Emily.Tensor.tensor([1, 2, 3]), Emily.Tensor.tensor([1.0, 3.0, 2.0]))
        #Emily.Tensor<
          u8[3]
          #{output}
        >
    """
    @spec unquote(name)(tensor_or_number, tensor_or_number) :: tensor
    def unquote(name)(left, right),
      do:
        binary(
          left,
          right,
          unquote(name),
          unquote(name),
          unquote(if ordered, do: :real, else: :any)
        )
  end

  @logical [
    logical_and: {"and", "[0, 0, 0, 1]"},
    logical_or: {"or", "[0, 1, 1, 1]"},
    logical_xor: {"exclusive or", "[0, 1, 1, 0]"}
  ]

  for {name, {what, output}} <- @logical do
    @doc """
    Element-wise logical #{what} with broadcasting: any non-zero value
    (NaN included) is true. The output is u8 (1 or 0).

    ## Examples

        iex> Emily.Tensor.#{name}(Emily.Tensor.tensor([0, 0, 1, 1]), Emily.Tensor.tensor([0.0, 2.0, 0.0, -1.0]))
        #Emily.Tensor<
          u8[4]
          #{output}
        >
    """
    @spec unquote(name)(tensor_or_number, tensor_or_number) :: tensor
    def unquote(name)(left, right), do: binary(left, right, unquote(name), unquote(name))
  end

  # ---------------------------------------------------------------------------
  # select and clip
  # ---------------------------------------------------------------------------

  @doc """
  Picks `on_true` where `pred` is non-zero and `on_false` elsewhere.

  `pred` may have any type. The output shape is the broadcast of all three
  arguments and its type the merge of `on_true` and `on_false` (as for
  binary operations).

  ## Examples

      iex> Emily.Tensor.select(Emily.Tensor.tensor([1, 0, 1]), Emily.Tensor.tensor([1, 2, 3]), Emily.Tensor.tensor([4, 5, 6]))
      #Emily.Tensor<
        s32[3]
        [1, 5, 3]
      >

      iex> Emily.Tensor.select(Emily.Tensor.tensor([[1], [0]]), Emily.Tensor.tensor([1, 2], type: :u8), 0.5)
      #Emily.Tensor<
        f32[2][2]
        [
          [1.0, 2.0],
          [0.5, 0.5]
        ]
      >
  """
  @spec select(tensor_or_number, tensor_or_number, tensor_or_number) :: tensor
  def select(pred, on_true, on_false) do
    pred = Core.to_tensor(operand!(pred))
    on_true = operand!(on_true)
    on_false = operand!(on_false)
    type = binary_type(on_true, on_false)
    t = Core.to_tensor(on_true, type)
    f = Core.to_tensor(on_false, type)
    Core.wrap(Native.select(pred.ref, t.ref, f.ref))
  end

  @doc """
  Clips each element of `tensor` to `[min, max]` (`min(max(tensor, min),
  max)`). `min` and `max` are numbers or tensors that broadcast to
  `tensor`'s shape. The type is `merge(tensor, merge(min, max))`, with a
  number bound taken as its inferred type (an integer is s32, a float f32).
  Complex inputs raise.

  ## Examples

      iex> Emily.Tensor.clip(Emily.Tensor.tensor([[1, 2, 3], [4, 5, 6]]), 2, 4)
      #Emily.Tensor<
        s32[2][3]
        [
          [2, 2, 3],
          [4, 4, 4]
        ]
      >

      iex> Emily.Tensor.clip(Emily.Tensor.tensor([1, 2, 3], type: :u8), 1.5, 2.5)
      #Emily.Tensor<
        f32[3]
        [1.5, 2.0, 2.5]
      >

      iex> Emily.Tensor.clip(Emily.Tensor.tensor([-1.0, 0.5, 7.0]), Emily.Tensor.tensor([0.0, 1.0, 2.0]), 5)
      #Emily.Tensor<
        f32[3]
        [0.0, 1.0, 5.0]
      >
  """
  @spec clip(tensor_or_number, tensor_or_number, tensor_or_number) :: tensor
  def clip(tensor, min, max) do
    t = Core.to_tensor(operand!(tensor))
    lo = Core.to_tensor(operand!(min))
    hi = Core.to_tensor(operand!(max))

    for x <- [t, lo, hi], do: assert_not_complex!(x.type, :clip, 3)

    type = Type.merge(t.type, Type.merge(lo.type, hi.type))

    for b <- [lo, hi], not broadcastable_to?(b.shape, t.shape) do
      raise ArgumentError,
            "clip expects min and max to be scalars or to broadcast to the tensor's shape " <>
              "#{inspect(t.shape)}, got: #{inspect(b.shape)}"
    end

    t = Core.cast(t, type)
    Core.wrap(Native.clip(t.ref, Core.cast(lo, type).ref, Core.cast(hi, type).ref))
  end

  # ---------------------------------------------------------------------------
  # Helpers
  # ---------------------------------------------------------------------------

  defp unary_same(tensor, op) do
    t = Core.to_tensor(tensor)
    Core.wrap(apply(Native, op, [t.ref]))
  end

  defp unary_integer(tensor, op) do
    t = Core.to_tensor(tensor)
    assert_bitwise_type!(t.type, op)
    Core.wrap(apply(Native, op, [t.ref]))
  end

  # kind: :any (promoted type as is), :real (complex raises), :floating
  # (to_floating of the promoted type), :floating_real (both), :integer and
  # :bitwise (the promoted type must be an integer type).
  defp binary(left, right, name, op, kind \\ :any) do
    left = operand!(left)
    right = operand!(right)
    type = binary_type(left, right)

    type =
      case kind do
        :any ->
          type

        :real ->
          assert_not_complex!(type, name, 2)

        :floating ->
          Type.to_floating(type)

        :floating_real ->
          assert_not_complex!(type, name, 2)
          Type.to_floating(type)

        :integer ->
          assert_integer!(type, name)

        :bitwise ->
          assert_bitwise_type!(type, name)
      end

    l = Core.to_tensor(left, type)
    r = Core.to_tensor(right, type)
    Core.wrap(apply(Native, op, [l.ref, r.ref]))
  end

  # Nx's output type of a binary op on tensors and/or numbers.
  defp binary_type(%Emily.Tensor{type: a}, %Emily.Tensor{type: b}), do: Type.merge(a, b)
  defp binary_type(%Emily.Tensor{type: a}, n), do: merge_number(a, n)
  defp binary_type(n, %Emily.Tensor{type: b}), do: merge_number(b, n)
  defp binary_type(a, b), do: Type.merge(Type.infer(a), Type.infer(b))

  # A complex number merges as a c64 tensor would (f64 with a complex gives
  # c128, as in Nx); everything else follows Type.merge_number/2.
  defp merge_number(type, %Emily.Complex{}), do: Type.merge(type, {:c, 64})
  defp merge_number(type, n), do: Type.merge_number(type, n)

  defp operand!(%Emily.Tensor{} = t), do: t
  defp operand!(n) when is_number(n), do: n
  defp operand!(%Emily.Complex{} = c), do: c
  defp operand!(a) when a in [:nan, :infinity, :neg_infinity], do: a

  defp operand!(other),
    do: raise(ArgumentError, "expected a tensor or a number, got: #{inspect(other)}")

  defp assert_not_complex!({:c, _}, name, arity),
    do: raise(ArgumentError, "Emily.Tensor.#{name}/#{arity} does not support complex inputs")

  defp assert_not_complex!(type, _name, _arity), do: type

  defp assert_bitwise_type!({kind, _} = type, _op) when kind in [:u, :s], do: type

  defp assert_bitwise_type!(type, _op) do
    raise ArgumentError,
          "bitwise operators expect integer tensors as inputs and outputs an integer tensor, " <>
            "got: #{inspect(type)}"
  end

  defp assert_integer!({kind, _} = type, _name) when kind in [:u, :s], do: type

  defp assert_integer!(type, name) do
    raise ArgumentError,
          "#{name} expects integer tensors as inputs and outputs an integer tensor, " <>
            "got: #{inspect(type)}"
  end

  defp broadcastable_to?(from, to) when tuple_size(from) > tuple_size(to), do: false

  defp broadcastable_to?(from, to) do
    lead = tuple_size(to) - tuple_size(from)

    from
    |> Tuple.to_list()
    |> Enum.with_index()
    |> Enum.all?(fn {d, i} -> d == 1 or d == elem(to, i + lead) end)
  end
end

defmodule Emily.Backend.Elementwise do
  @moduledoc false
  # The elementwise callbacks of Emily.Backend. Nx has already computed the
  # output type (promotion, floats for the math functions, u8 for
  # predicates); each callback converts its inputs to the type the engine op
  # must run in and calls the op of the same name. The engine implements
  # Nx's edge rules itself (integer division and remainder signs, shifts,
  # NaN in min/max, complex branches), so there is no policy here.

  alias Emily.Backend.Util
  alias Emily.Native

  # Math functions: the output is a float (or complex) type and the op runs
  # in it (integer inputs are converted first, as in Nx).
  @math_ops Enum.map(Nx.Shared.unary_math_funs(), &elem(&1, 0))

  # Unary ops whose output type is the input's.
  @same_type_ops [:negate, :sign, :floor, :ceil, :round, :conjugate] ++
                   [:bitwise_not, :population_count, :count_leading_zeros]

  @doc false
  def unary_ops, do: @math_ops ++ @same_type_ops ++ [:abs, :real, :imag, :is_nan, :is_infinity]

  # erf_inv below f64 uses Nx.Random's kernel (Giles' approximation in
  # double, rounded once): at these precisions it is as accurate, and it
  # gives Nx's samples to the last bit. f64 keeps the engine's full-precision
  # erf_inv (Giles' approximation is only good to ~1e-8 there).
  def erf_inv(%{type: {:f, 64}} = out, tensor),
    do: Util.wrap(out, Native.erf_inv(Util.ref_as(tensor, out.type)), [tensor])

  def erf_inv(out, tensor),
    do: Util.wrap(out, Native.random_erf_inv(Util.ref_as(tensor, out.type)), [tensor])

  for op <- (@math_ops -- [:erf_inv]) ++ @same_type_ops do
    def unquote(op)(out, tensor) do
      Util.wrap(out, Native.unquote(op)(Util.ref_as(tensor, out.type)), [tensor])
    end
  end

  # abs, real and imag of a complex tensor give its real counterpart: the
  # engine op takes the complex input as it is.
  def abs(out, %{type: {:c, _}} = t), do: Util.wrap(out, Native.abs(Util.ref(t)), [t])
  def abs(out, t), do: Util.wrap(out, Native.abs(Util.ref_as(t, out.type)), [t])

  def real(out, %{type: {:c, _}} = t), do: Util.wrap(out, Native.real(Util.ref(t)), [t])
  def real(out, t), do: Util.wrap(out, Util.ref_as(t, out.type), [t])

  def imag(out, %{type: {:c, _}} = t), do: Util.wrap(out, Native.imag(Util.ref(t)), [t])
  def imag(out, t),
    do: Util.wrap(out, Util.full(0, Util.dims(out.shape), out.type) |> Util.on_device_of(Util.ref(t)), [t])

  # The predicates accept every type; integers are never NaN nor infinite.
  def is_nan(out, t), do: Util.wrap(out, Native.is_nan(Util.ref(t)), [t])
  def is_infinity(out, t), do: Util.wrap(out, Native.is_infinity(Util.ref(t)), [t])

  # Binary ops computed in the output type Nx gives (Nx's min/max are the
  # engine's minimum/maximum).
  @arith_ops [add: :add, subtract: :subtract, multiply: :multiply, pow: :pow] ++
               [remainder: :remainder, divide: :divide, atan2: :atan2, quotient: :quotient] ++
               [min: :minimum, max: :maximum, bitwise_and: :bitwise_and] ++
               [bitwise_or: :bitwise_or, bitwise_xor: :bitwise_xor] ++
               [left_shift: :left_shift, right_shift: :right_shift]

  # Comparisons and logical ops: the output is u8 and the op runs in the
  # merged type of the inputs.
  @pred_ops [:equal, :not_equal, :greater, :less, :greater_equal, :less_equal] ++
              [:logical_and, :logical_or, :logical_xor]

  @doc false
  def binary_ops, do: Keyword.keys(@arith_ops) ++ @pred_ops

  for {op, engine_op} <- @arith_ops do
    def unquote(op)(out, left, right) do
      [l, r] = Util.refs([left, right])
      type = out.type
      Util.wrap(out, Native.unquote(engine_op)(Util.cast(l, type), Util.cast(r, type)), [left, right])
    end
  end

  for op <- @pred_ops do
    def unquote(op)(out, left, right) do
      [l, r] = Util.refs([left, right])
      type = Nx.Type.merge(left.type, right.type)
      Util.wrap(out, Native.unquote(op)(Util.cast(l, type), Util.cast(r, type)), [left, right])
    end
  end

  @doc "`Nx.select/3`: any nonzero predicate picks `on_true`."
  def select(out, pred, on_true, on_false) do
    [p, t, f] = Util.refs([pred, on_true, on_false])
    type = out.type
    ref = Native.select(Util.pred(p), Util.cast(t, type), Util.cast(f, type))
    # select broadcasts; a scalar predicate with scalar branches still has
    # to fill the output shape.
    Util.wrap(out, broadcast_to(ref, out.shape), [on_true, on_false, pred])
  end

  @doc "`Nx.clip/3` in the output type."
  def clip(out, tensor, min, max) do
    [t, lo, hi] = Util.refs([tensor, min, max])
    type = out.type
    Util.wrap(out, Native.clip(Util.cast(t, type), Util.cast(lo, type), Util.cast(hi, type)), [tensor])
  end

  @doc "`Nx.logical_not/1` natively (the block's default is `x == 0`)."
  def logical_not(out, tensor), do: Util.wrap(out, Native.logical_not(Util.ref(tensor)), [tensor])

  @doc "`Nx.phase/1` of a complex tensor: `atan2(imag, real)` in the real type."
  def phase(out, %{type: {:c, _}} = tensor) do
    ref = Util.ref(tensor)
    Util.wrap(out, Native.atan2(Native.imag(ref), Native.real(ref)), [tensor])
  end

  defp broadcast_to(ref, shape) do
    dims = Util.dims(shape)
    if Native.shape(ref) == dims, do: ref, else: Native.broadcast_to(ref, dims)
  end
end

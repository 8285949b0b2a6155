defmodule EmilyTest.Differential.Reference do
  @moduledoc false
  # Corrected references where Nx.BinaryBackend itself is wrong, property
  # checks for decompositions, and small helpers of the generators. Every
  # correction below was checked against an independent oracle (Python's
  # cmath/numpy, :math) before it was written down.
  #
  # A reference is a function of the BinaryBackend arguments (a list), or
  # nil where BinaryBackend's own answer is the reference.

  import EmilyTest.Differential.Gen, only: [int: 2, pick: 1]

  ## Elementwise corrections

  @math_ops ~w(exp expm1 log log1p sigmoid cos sin tan cosh sinh tanh acos asin atan acosh asinh atanh sqrt rsqrt cbrt erf erfc erf_inv log2 log10)a

  # Complex acos: BinaryBackend uses -i log(z + sqrt(z^2 - 1)), which picks
  # the wrong branch in half of the plane (acos(-3+0.3i) gives
  # -3.036+1.769i instead of 3.036-1.769i). acos = pi/2 - asin (BinaryBackend's
  # asin is right off the real axis, where the generator's complex values lie).
  def unary(:acos, %{type: {:c, _}}), do: fn [z] -> Nx.subtract(:math.pi() / 2, Nx.asin(z)) end

  # Complex acosh: log(z + sqrt(z^2 - 1)) has a negative real part for
  # Re z < 0 (acosh(-3+0.3i) = -1.769-3.036i instead of 1.769+3.036i);
  # the principal value is log(z + sqrt(z + 1) sqrt(z - 1)).
  def unary(:acosh, %{type: {:c, _}}) do
    fn [z] ->
      Nx.log(Nx.add(z, Nx.multiply(Nx.sqrt(Nx.add(z, 1)), Nx.sqrt(Nx.subtract(z, 1)))))
    end
  end

  # Complex atanh: 0.5 log((1+z)/(1-z)) loses the sign of a zero imaginary
  # part on the cut |x| > 1 (atanh(2+0i) gives 0.549-1.571i instead of
  # 0.549+1.571i); 0.5 (log(1+z) - log(1-z)) keeps it.
  def unary(:atanh, %{type: {:c, _}}) do
    fn [z] -> Nx.multiply(0.5, Nx.subtract(Nx.log(Nx.add(1, z)), Nx.log(Nx.subtract(1, z)))) end
  end

  # Complex sign: BinaryBackend returns 1+0i for every nonzero z; sign is
  # z / |z| (0 for 0).
  def unary(:sign, %{type: {:c, _}}) do
    fn [z] ->
      abs = Nx.abs(z)
      Nx.select(Nx.equal(abs, 0), Nx.tensor(0, type: z.type), Nx.divide(z, abs))
    end
  end

  # Float sign: BinaryBackend gives sign(NaN) = 1.0 (it is NaN) and
  # sign(-Inf) = 1.0 (it is -1.0).
  def unary(:sign, %{type: {kind, _}}) when kind in [:f, :bf] do
    fn [t] ->
      inf_sign =
        Nx.select(Nx.greater(t, 0), Nx.tensor(1, type: t.type), Nx.tensor(-1, type: t.type))

      Nx.select(Nx.is_nan(t), t, Nx.select(Nx.is_infinity(t), inf_sign, Nx.sign(t)))
    end
  end

  # tanh(+-Inf): BinaryBackend computes it from exponentials and gets NaN;
  # it is +-1.
  def unary(:tanh, %{type: {kind, _}}) when kind in [:f, :bf] do
    fn [t] -> Nx.select(Nx.is_infinity(t), Nx.select(Nx.greater(t, 0), 1, -1), Nx.tanh(t)) end
  end

  # f64 erf_inv: BinaryBackend's approximation is good to ~1e-7 relative
  # only (erf_inv(0.3) = 0.27246274547927750, exact 0.27246271472675443);
  # two Newton steps on erf(x) = y make it exact to f64.
  def unary(:erf_inv, %{type: {:f, 64}}) do
    fn [y] ->
      raw_y = y
      raw = with_ieee_fallback(:erf_inv, y)
      # |x| < 10 leaves out NaN, +-Inf and BinaryBackend's -1.6e308 for y = -1.
      finite = Nx.less(Nx.abs(raw), 10)
      x = Nx.select(finite, raw, 0)
      y = Nx.select(finite, y, 0)

      newton = fn x ->
        Nx.subtract(
          x,
          Nx.divide(
            Nx.subtract(Nx.erf(x), y),
            Nx.multiply(2 / :math.sqrt(:math.pi()), Nx.exp(Nx.negate(Nx.multiply(x, x))))
          )
        )
      end

      refined = x |> newton.() |> newton.()

      inf =
        Nx.select(
          Nx.greater(raw, 0),
          Nx.Constants.infinity(y.type),
          Nx.Constants.neg_infinity(y.type)
        )

      Nx.select(
        Nx.is_infinity(with_ieee_fallback(:erf_inv, raw_y)),
        inf,
        Nx.select(finite, refined, raw)
      )
    end
  end

  # Float abs: BinaryBackend gives abs(-0.0) = -0.0; it is +0.0.
  def unary(:abs, %{type: {kind, _}}) when kind in [:f, :bf] do
    fn [t] -> Nx.select(Nx.equal(t, 0), Nx.tensor(0, type: t.type), Nx.abs(t)) end
  end

  # floor/ceil/round: BinaryBackend raises on NaN and +-Inf (":math.floor
  # not a number"); they are returned as they are.
  def unary(op, %{type: {kind, _}}) when op in [:floor, :ceil, :round] and kind in [:f, :bf] do
    fn [t] ->
      finite = Nx.logical_not(Nx.logical_or(Nx.is_nan(t), Nx.is_infinity(t)))
      Nx.select(finite, apply(Nx, op, [Nx.select(finite, t, 0)]), t)
    end
  end

  # Real math functions: BinaryBackend raises ArithmeticError outside the
  # domain (sqrt(-6), asin(10), log10(-Inf)) and on overflow (exp(32767),
  # sigmoid(-1038)) where IEEE gives NaN or +-Inf: those elements are
  # computed one by one, a raise giving the IEEE answer.
  def unary(op, %{type: type}) when type not in [{:c, 64}, {:c, 128}] do
    if op in @math_ops, do: fn [t] -> with_ieee_fallback(op, t) end, else: nil
  end

  def unary(_op, _t), do: nil

  defp with_ieee_fallback(op, t) do
    apply(Nx, op, [t])
  rescue
    _ ->
      # log2/log10 divide by an f32 log(base): f16/bf16 give f32.
      floating = Nx.Type.to_floating(t.type)
      out_type = if op in [:log2, :log10], do: Nx.Type.merge(floating, {:f, 32}), else: floating

      t
      |> Nx.to_flat_list()
      |> Enum.map(fn x ->
        try do
          Nx.tensor(x, type: t.type) |> then(&apply(Nx, op, [&1])) |> Nx.to_number()
        rescue
          _ -> ieee(op, x)
        end
      end)
      |> Nx.tensor(type: out_type)
      |> Nx.reshape(t.shape, names: t.names)
  end

  defp ieee(op, x) when op in [:exp, :expm1, :cosh],
    do: if(x == :neg_infinity or (x < 0 and op != :cosh), do: 0.0, else: :infinity)

  defp ieee(:sinh, x), do: if(x < 0, do: :neg_infinity, else: :infinity)
  defp ieee(:sigmoid, x), do: if(x < 0, do: 0.0, else: 1.0)
  defp ieee(op, x) when op in [:log, :log2, :log10] and x == 0, do: :neg_infinity
  defp ieee(:log1p, x) when x == -1, do: :neg_infinity
  defp ieee(:rsqrt, x) when x == 0, do: :infinity

  defp ieee(op, x) when op in [:atanh, :erf_inv] and (x == 1 or x == -1),
    do: if(x > 0, do: :infinity, else: :neg_infinity)

  defp ieee(_op, _x), do: :nan

  # pow, remainder and atan2: BinaryBackend raises ArithmeticError where
  # IEEE gives NaN (pow(-0.92, 0.2), remainder(x, 0.0)): elements one by one.
  def binary(op, left, right, out_type) do
    fn [l, r] ->
      try do
        # pow(1, y) is 1 for every y; BinaryBackend gives pow(1, -Inf) = 0.
        cond do
          op == :pow and Nx.Type.float?(out_type) ->
            pow(l, r, out_type)

          # fmod(x, +-Inf) is x; BinaryBackend gives NaN.
          op == :remainder and Nx.Type.float?(out_type) ->
            rem = Nx.remainder(l, r)
            Nx.select(Nx.is_infinity(r), Nx.as_type(l, out_type), rem) |> Nx.rename(rem.names)

          true ->
            apply(Nx, op, [l, r])
        end
      rescue
        _ ->
          %{shape: shape, names: names} = Nx.add(names_of(left), names_of(right))
          pairs = Enum.zip(flat(l, shape), flat(r, shape))

          type = fn x, t ->
            if is_struct(t, Nx.Tensor), do: Nx.tensor(x, type: t.type), else: x
          end

          pairs
          |> Enum.map(fn {a, b} ->
            try do
              Nx.to_number(apply(Nx, op, [type.(a, l), type.(b, r)]))
            rescue
              _ -> ieee_binary(op, a, b)
            end
          end)
          |> Nx.tensor(type: out_type)
          |> Nx.reshape(shape, names: names)
      end
    end
  end

  # pow(1, y) is 1 for every y (BinaryBackend: pow(1, -Inf) = 0);
  # pow(-Inf, y > 0) is +Inf unless y is an odd integer (BinaryBackend: NaN).
  defp pow(l, r, out_type) do
    one = Nx.tensor(1, type: out_type)

    neg_inf_base =
      Nx.logical_and(Nx.equal(l, Nx.Constants.neg_infinity(out_type)), Nx.greater(r, 0))

    odd = Nx.equal(Nx.remainder(Nx.abs(r), 2), 1)
    inf = Nx.select(odd, Nx.Constants.neg_infinity(out_type), Nx.Constants.infinity(out_type))
    pow = Nx.pow(l, r)
    Nx.select(Nx.equal(l, 1), one, Nx.select(neg_inf_base, inf, pow)) |> Nx.rename(pow.names)
  end

  # x / 0 (or an overflowing x / tiny) is +-Inf with the sign of x times
  # the sign of the divisor (of a zero too); 0 / 0 is NaN.
  defp ieee_binary(:divide, a, b) when is_number(a) and a != 0 and is_number(b) do
    <<sign_b::1, _::63>> = <<b * 1.0::float>>
    if a > 0 == (sign_b == 0), do: :infinity, else: :neg_infinity
  end

  # pow(+-0, y < 0) is +Inf, -Inf for -0 and an odd integer y.
  defp ieee_binary(:pow, a, b) when a == 0 and is_number(b) and b < 0 do
    <<sign_a::1, _::63>> = <<a * 1.0::float>>
    odd? = b == Float.round(b * 1.0) and rem(trunc(b), 2) != 0
    if sign_a == 1 and odd?, do: :neg_infinity, else: :infinity
  end

  # fmod(x, y) with |x| < |y| is x (BinaryBackend raises for a huge y).
  defp ieee_binary(:remainder, a, b) when is_number(a) and b in [:infinity, :neg_infinity],
    do: a * 1.0

  defp ieee_binary(:remainder, a, b) when is_number(a) and is_number(b) and abs(a) < abs(b), do: a

  defp ieee_binary(:pow, :neg_infinity, b) when is_number(b) and b > 0,
    do:
      if(b == Float.round(b * 1.0) and rem(trunc(b), 2) == 1, do: :neg_infinity, else: :infinity)

  defp ieee_binary(_op, _a, _b), do: :nan

  # clip(NaN, lo, hi) is NaN (max/min propagate NaN in Nx); BinaryBackend
  # compares with Erlang terms and gives lo.
  def clip(%{type: {kind, _}}) when kind in [:f, :bf] do
    fn [t, lo, hi] ->
      out = Nx.clip(t, lo, hi)
      Nx.select(Nx.is_nan(t), Nx.as_type(t, out.type), out)
    end
  end

  def clip(_t), do: nil

  defp names_of(%Nx.Tensor{} = t), do: Nx.broadcast(Nx.tensor(1.0), t.shape, names: t.names)
  defp names_of(_n), do: 1.0
  defp flat(%Nx.Tensor{} = t, shape), do: t |> Nx.broadcast(shape) |> Nx.to_flat_list()
  defp flat(n, shape), do: List.duplicate(n, Tuple.product(shape))

  # all/any with nothing to reduce (a scalar, axes: []): BinaryBackend
  # returns the values converted to u8 (all(-2.5) is 254), not x != 0.
  def all_any(t, opts) do
    if t.shape == {} or opts[:axes] == [], do: fn [t] -> Nx.not_equal(t, 0) end, else: nil
  end

  # pad of an integer tensor with a float value: Nx gives a float output
  # type, BinaryBackend writes the float's bits into the integer tensor
  # (pad(s32 [1, 2], 2.5) gives s32 [1075838976, 1, 2, 1075838976], typed
  # f32 by Nx only in the struct). Reference: convert first, then pad.
  def pad(t, value, config) do
    out_type =
      if is_number(value),
        do: Nx.Type.merge_number(t.type, value),
        else: Nx.Type.merge(t.type, value.type)

    if out_type != t.type,
      do: fn [t, v] ->
        Nx.pad(Nx.as_type(t, out_type), Nx.as_type(Nx.tensor(v), out_type), config)
      end,
      else: nil
  end

  # bf16 conversion: BinaryBackend truncates (f32 1.01171875 -> bf16
  # 1.0078125, bits 16257, where rounding to nearest even gives 1.015625,
  # bits 16258). Reference: round the f32 bits to nearest even (for
  # sources exactly representable in f32; wider sources get a 1-ulp
  # tolerance in the case).
  def as_type(%{type: from}, {:bf, 16}) when from not in [{:c, 64}, {:c, 128}] do
    fn [t] ->
      bits = t |> Nx.as_type(:f32) |> Nx.bitcast(:u32)
      lsb = bits |> Nx.right_shift(16) |> Nx.bitwise_and(1)
      rounded = bits |> Nx.add(0x7FFF) |> Nx.add(lsb) |> Nx.right_shift(16)
      nan = Nx.is_nan(Nx.as_type(t, :f32))
      rounded |> then(&Nx.select(nan, 0x7FC0, &1)) |> Nx.as_type(:u16) |> Nx.bitcast(:bf16)
    end
  end

  def as_type(_t, _to), do: nil

  # FFT along a non-last axis: BinaryBackend transforms the wrong elements
  # (fft of iota({4, 3, 5}) |> sin along axis 0 is off by up to 5.1).
  # Reference: move the axis last, transform, move it back.
  def fft(op, t, opts) do
    axis = opts[:axis]
    last = tuple_size(t.shape) - 1

    cond do
      # A transform of length 1 is the identity: BinaryBackend returns a
      # tensor with an empty binary (its to_binary raises MatchError).
      (opts[:length] || elem(t.shape, axis)) == 1 -> fn [t] -> length_one(t, axis) end
      axis != last -> fn [t] -> fft_along(t, op, axis, opts[:length]) end
      true -> nil
    end
  end

  # irfft: BinaryBackend raises for a last axis of 2 ("length at axis 0
  # must be greater than or equal to 1, got: 0"; Emily is right:
  # irfft([a, b]) = [(a + b) / 2, (a - b) / 2] in real parts). Reference:
  # the real part of the ifft of the Hermitian extension.
  def irfft(_t, opts) do
    fn [x] ->
      last = tuple_size(x.shape) - 1
      m = elem(x.shape, last)
      n = opts[:length] || 2 * (m - 1)
      k = div(n, 2) + 1
      half = x |> Nx.slice_along_axis(0, min(m, k), axis: last)

      half =
        if m < k,
          do: Nx.pad(half, 0, List.duplicate({0, 0, 0}, last) ++ [{0, k - m, 0}]),
          else: half

      mirror_len = n - k

      full =
        if mirror_len > 0,
          do:
            Nx.concatenate(
              [
                half,
                half
                |> Nx.slice_along_axis(1, mirror_len, axis: last)
                |> Nx.reverse(axes: [last])
                |> Nx.conjugate()
              ],
              axis: last
            ),
          else: half

      full |> fft_along(:ifft, last, nil) |> Nx.real()
    end
  end

  @doc "rfft of length 1: the first element, as complex (see fft/3)."
  def rfft(t, opts) do
    last = tuple_size(t.shape) - 1

    if (opts[:length] || elem(t.shape, last)) == 1,
      do: fn [t] -> length_one(t, last) end,
      else: nil
  end

  defp length_one(t, axis) do
    complex = if t.type == {:f, 64} or t.type == {:c, 128}, do: {:c, 128}, else: {:c, 64}
    t |> Nx.slice_along_axis(0, 1, axis: axis) |> Nx.as_type(complex)
  end

  defp fft_along(t, op, axis, length) do
    if (length || elem(t.shape, axis)) == 1,
      do: length_one(t, axis),
      else: fft_moved(t, op, axis, length)
  end

  defp fft_moved(t, op, axis, length) do
    last = tuple_size(t.shape) - 1
    perm = List.delete(Enum.to_list(0..last), axis) ++ [axis]
    inverse = Enum.map(0..last, fn i -> Enum.find_index(perm, &(&1 == i)) end)
    opts = if length, do: [length: length], else: []

    t
    |> Nx.transpose(axes: perm)
    |> then(&apply(Nx, op, [&1, opts]))
    |> Nx.transpose(axes: inverse)
  end

  # fft2 runs two 1-D transforms: the first along a non-last axis
  # (see fft/3).
  def fft2(op, _t, opts) do
    one = if op == :fft2, do: :fft, else: :ifft
    [a0, a1] = opts[:axes]
    [l0, l1] = opts[:lengths] || [nil, nil]
    fn [t] -> t |> fft_along(one, a1, l1) |> fft_along(one, a0, l0) end
  end

  ## Decompositions: properties of Emily's result, and its conventions
  ## compared with BinaryBackend's where they are unique.

  def check_qr([a], {q, r}, opts) do
    {qb, rb} = Nx.LinAlg.qr(a, opts)
    n = elem(a.shape, 1)

    with :ok <- same_meta([q, r], [qb, rb]),
         :ok <- close("Q R = A", Nx.dot(q, r), a, a.type),
         :ok <-
           close(
             "Q^T Q = I",
             Nx.dot(Nx.transpose(q), q),
             Nx.eye(elem(q.shape, 1), type: a.type),
             a.type
           ),
         :ok <- close("R upper", Nx.triu(r), r, a.type) do
      # |diag(R)| is unique for a full-rank A.
      k = min(n, elem(r.shape, 0))
      d = fn r -> r |> Nx.slice([0, 0], [k, k]) |> Nx.take_diagonal() |> Nx.abs() end
      close("|diag R| vs BinaryBackend", d.(r), d.(rb), a.type)
    end
  end

  # BinaryBackend's f64 eigh is good to ~1e-7 only (|A v - w v| is 5e-4
  # for a 4x4 where Emily's is 4e-15): eigenvalues at f32 precision, the
  # reconstruction at f64.
  def check_eigh([a], {w, v}) do
    {wb, vb} = Nx.LinAlg.eigh(a)

    with :ok <- same_meta([w, v], [wb, vb]),
         :ok <- close("eigenvalues (in Nx's order) vs BinaryBackend", w, wb, {:f, 32}),
         :ok <- close("V diag(w) V^T = A", Nx.dot(Nx.multiply(v, w), Nx.transpose(v)), a, a.type) do
      close(
        "V^T V = I",
        Nx.dot(Nx.transpose(v), v),
        Nx.eye(elem(v.shape, 0), type: a.type),
        a.type
      )
    end
  end

  # BinaryBackend's f64 SVD is good to ~1e-8 only (singular values
  # 3.2840025492573974 vs 3.284002576538656, which reconstructs A to 1e-15):
  # singular values are compared at f32 precision, the reconstruction at f64.
  def check_svd([a], {u, s, vt}) do
    {ub, sb, vtb} = Nx.LinAlg.svd(a)
    k = Nx.size(s)
    {m, n} = a.shape
    us = Nx.multiply(Nx.slice(u, [0, 0], [m, k]), s)

    with :ok <- same_meta([u, s, vt], [ub, sb, vtb]),
         :ok <- close("singular values vs BinaryBackend", s, sb, {:f, 32}) do
      close("U S V^T = A", Nx.dot(us, Nx.slice(vt, [0, 0], [k, n])), a, a.type)
    end
  end

  defp same_meta(got, exp) do
    if Enum.map(got, &{&1.shape, &1.type}) == Enum.map(exp, &{&1.shape, &1.type}),
      do: :ok,
      else:
        {:error,
         "shapes/types #{inspect(Enum.map(got, &{&1.shape, &1.type}))} vs #{inspect(Enum.map(exp, &{&1.shape, &1.type}))}"}
  end

  defp close(what, got, exp, type) do
    tol = if type in [{:f, 64}, {:c, 128}], do: 1.0e-9, else: 1.0e-4

    if Nx.to_number(Nx.all_close(got, exp, atol: tol * 10, rtol: tol)) == 1,
      do: :ok,
      else:
        {:error,
         "#{what} fails\n    got:      #{EmilyTest.Differential.show(got)}\n    expected: #{EmilyTest.Differential.show(exp)}"}
  end

  ## Helpers for the generators

  @doc "The largest finite |x| over tensors and numbers."
  def max_abs(items) do
    items
    |> Enum.map(fn
      %Nx.Tensor{} = t -> t |> finite_abs() |> Nx.reduce_max() |> Nx.to_number()
      %Complex{} = c -> Complex.abs(c)
      n -> abs(n)
    end)
    |> Enum.max(fn -> 0 end)
    |> finite()
  end

  @doc "The sum of finite |x|."
  def sum_abs(t), do: t |> finite_abs() |> Nx.sum() |> Nx.to_number() |> finite()

  defp finite(x) when is_number(x), do: min(x * 1.0, 1.0e300)
  defp finite(_overflow), do: 1.0e300

  # In f64 before abs: abs(s16 -32768) wraps to -32768.
  defp finite_abs(t) do
    a =
      if match?({:c, _}, t.type),
        do: t |> Nx.abs() |> Nx.as_type(:f64),
        else: t |> Nx.as_type(:f64) |> Nx.abs()

    Nx.select(Nx.logical_or(Nx.is_nan(a), Nx.is_infinity(a)), 0.0, a)
  end

  @doc "Hadamard's bound on |det A|, the scale of the determinant's error."
  def det_scale(a),
    do:
      a
      |> Nx.abs()
      |> Nx.as_type(:f64)
      |> Nx.sum(axes: [-1])
      |> Nx.product(axes: [-1])
      |> Nx.reduce_max()
      |> Nx.to_number()

  @doc "A random shape of `n` elements (rank 0..4)."
  def factor_shape(1), do: pick([{}, {1}, {1, 1}])

  def factor_shape(n) do
    divisors = for d <- 1..n, rem(n, d) == 0, do: d
    d = pick(divisors)
    rest = div(n, d)
    if rest == 1, do: {d}, else: Tuple.insert_at(factor_shape(rest), 0, d)
  end

  @doc "The rows of an index tensor without duplicates, in order."
  def unique_rows(idx) do
    type = idx.type
    idx |> Nx.to_list() |> Enum.uniq() |> Nx.tensor(type: type, backend: Nx.BinaryBackend)
  end

  @doc "A tensor of distinct values (a permutation of 0..n-1, offset)."
  def distinct(type, shape) do
    n = Tuple.product(shape)
    offset = int(-n, 0)

    Enum.shuffle(0..(n - 1))
    |> Enum.map(&(&1 + offset))
    |> Nx.tensor(type: type, backend: Nx.BinaryBackend)
    |> Nx.reshape(shape)
  end
end

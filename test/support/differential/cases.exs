defmodule EmilyTest.Differential.Cases do
  @moduledoc false
  # The catalogue of the differential test: one generator per Nx function.
  # A generator draws inputs and options with EmilyTest.Differential.Gen and
  # returns a call (see `call/4`): the runner applies `fun` to `args` once
  # with tensors on Nx.BinaryBackend and once with copies on Emily.Backend.
  #
  # `:backend` in `args` stands for the backend itself (creation functions).

  import EmilyTest.Differential.Gen
  alias EmilyTest.Differential.Reference, as: Ref

  @doc """
  A call. Options:

    * `:opts` - the options as printed in a failure message
    * `:mode` - see EmilyTest.Differential.Compare (default: exact)
    * `:scale` - the `abs` scale of `{:tol, rel, abs}` (default 1.0)
    * `:eps_of` - the type whose epsilon the tolerance uses (default: the
      output's)
    * `:ref` - a corrected reference, a function of the BinaryBackend args
      used instead of `fun` where Nx.BinaryBackend is known to be wrong
    * `:check` - `fn args, emily_result -> :ok | {:error, msg}`: a property
      check of Emily's result instead of a comparison (decompositions whose
      conventions are not unique)
  """
  def call(name, args, fun, opts \\ []) do
    Map.merge(
      %{
        name: name,
        args: args,
        fun: fun,
        opts: [],
        mode: :exact,
        scale: 1.0,
        eps_of: nil,
        ref: nil,
        check: nil
      },
      Map.new(opts)
    )
  end

  @doc "Every generator: `{function name, weight, generator}`."
  def all do
    unary_math() ++
      unary_exact() ++
      binary() ++
      reductions() ++
      cumulative() ++
      ordering() ++
      shapes() ++
      indexing() ++
      creation() ++
      types() ++
      contractions() ++
      windows() ++
      linalg() ++ fft() ++ random()
  end

  ## Tolerances

  # Math functions: a few ulps of the output type, plus an absolute term of a
  # few eps for results near zero (argument reduction, cancellation).
  @math_tol {:tol, 8, 8}

  # Float results rounded once from an exact value are exact, except that
  # Nx.BinaryBackend truncates f32 -> bf16 instead of rounding: its bf16
  # results may be one ulp off (BinaryBackend bug, see Reference.bf16/1).
  defp rounded(%{type: {:bf, 16}}), do: {:tol, 1, 0}
  defp rounded(_), do: :exact

  defp float_out?(type), do: Nx.Type.float?(type) or match?({:c, _}, type)

  ## Elementwise

  # {function, float domain, complex inputs, extra tolerance factor}
  @math [
    exp: {:any, true, 1},
    expm1: {:any, true, 1},
    log: {:any, true, 1},
    log1p: {:any, true, 1},
    sigmoid: {:any, true, 1},
    cos: {:any, true, 1},
    sin: {:any, true, 1},
    tan: {{-1.4, 1.4}, true, 2},
    cosh: {:any, true, 1},
    sinh: {:any, true, 1},
    tanh: {:any, true, 1},
    acos: {{-1.0, 1.0}, true, 1},
    asin: {{-1.0, 1.0}, true, 1},
    atan: {:any, true, 1},
    acosh: {{1.0, 10.0}, true, 2},
    asinh: {:any, true, 1},
    atanh: {{-1.0, 1.0}, true, 2},
    sqrt: {:any, true, 1},
    rsqrt: {:any, true, 1},
    # BinaryBackend's f64 cbrt is x ** (1/3): ~60 ulps off for large x
    # (cbrt(-1.7976931348623157e308) = -5.643803094122288e102, exact
    # -5.643803094122362e102, which Emily gives).
    cbrt: {:any, false, 16},
    erf: {:any, false, 1},
    erfc: {:any, false, 4},
    erf_inv: {{-1.0, 1.0}, false, 4},
    log2: {:any, true, 1},
    log10: {:any, true, 1}
  ]

  defp unary_math do
    for {op, {domain, complex?, k}} <- @math do
      {"Nx.#{op}", 3,
       fn ->
         type = pick(real_types() ++ if(complex?, do: complex_types(), else: []))
         # Complex values stay moderate: overflow of complex functions is
         # NaN in BinaryBackend's Complex and Inf in C99.
         domain = if match?({:c, _}, type), do: {-4.0, 4.0}, else: domain
         # Integers stay small: Nx converts them to f32 first (Emily), where
         # BinaryBackend computes on the exact integer (sin(u32 4294967295)).
         edges = if Nx.Type.integer?(type), do: 0.0, else: 0.1
         t = tensor(type, shape(), domain: domain, edges: edges)
         {:tol, rel, abs} = @math_tol
         # log2/log10 are log(x) / log(base) with log(base) an f32 scalar:
         # f16/bf16 inputs give an f32 result of f16/bf16 precision.
         # Complex inverse functions in BinaryBackend (Erlang's Complex:
         # log(iz + sqrt(1 - z^2)) and kin) lose ~1e-8 to cancellation:
         # f32 precision for c128.
         eps_of =
           cond do
             op in [:log2, :log10] and type in [{:f, 16}, {:bf, 16}] -> type
             type == {:c, 128} and op in [:acos, :asin, :atan, :acosh, :asinh, :atanh] -> {:f, 32}
             true -> nil
           end

         call("Nx.#{op}", [t], &apply(Nx, op, &1),
           mode: {:tol, rel * k, abs * k},
           eps_of: eps_of,
           ref: Ref.unary(op, t)
         )
       end}
    end
  end

  @exact_unary [
    negate: :all,
    abs: :all,
    sign: :all,
    floor: :real,
    ceil: :real,
    round: :real,
    conjugate: :all,
    real: :all,
    imag: :all,
    is_nan: :all,
    is_infinity: :all,
    logical_not: :all,
    bitwise_not: :int,
    population_count: :int,
    count_leading_zeros: :int
  ]

  defp unary_exact do
    exact =
      for {op, types} <- @exact_unary do
        {"Nx.#{op}", 2,
         fn ->
           type = pick(types_of(types))
           t = tensor(type, shape())

           call("Nx.#{op}", [t], &apply(Nx, op, &1),
             ref: Ref.unary(op, t),
             mode: exact_unary_mode(op, type)
           )
         end}
      end

    phase =
      {"Nx.phase", 1,
       fn ->
         t = tensor(pick(all_types()), shape())
         call("Nx.phase", [t], &apply(Nx, :phase, &1), mode: @math_tol)
       end}

    [phase | exact]
  end

  # Complex sign is z / |z|: rounded. conjugate of a real x is x - 0i in
  # Emily, x + 0i in BinaryBackend (Complex.conjugate of a real number):
  # the sign of that zero is not compared.
  defp exact_unary_mode(:sign, {:c, _}), do: {:tol, 2, 2}
  # |z| is a hypot: within an ulp.
  defp exact_unary_mode(:abs, {:c, _}), do: {:tol, 2, 0}
  defp exact_unary_mode(:conjugate, _), do: :exact_nosign
  # BinaryBackend rounds through Erlang integers: round(-0.24) is +0.0
  # there, -0.0 in Emily (C's round keeps the sign).
  defp exact_unary_mode(op, _) when op in [:floor, :ceil, :round], do: :exact_nosign
  defp exact_unary_mode(_op, _type), do: :exact

  defp types_of(:all), do: all_types()
  defp types_of(:real), do: real_types()
  defp types_of(:int), do: int_types()
  defp types_of(:float), do: float_types()

  # {function, operand types, kind of comparison}
  @binary [
    add: {:all, :rounded},
    subtract: {:all, :rounded},
    multiply: {:all, :rounded},
    divide: {:all, :rounded},
    pow: {:all, :math},
    remainder: {:real, :rounded},
    atan2: {:real, :math},
    quotient: {:int, :exact},
    min: {:real, :nosign},
    max: {:real, :nosign},
    bitwise_and: {:int, :exact},
    bitwise_or: {:int, :exact},
    bitwise_xor: {:int, :exact},
    left_shift: {:int, :exact},
    right_shift: {:int, :exact},
    equal: {:all, :exact},
    not_equal: {:all, :exact},
    greater: {:real, :exact},
    less: {:real, :exact},
    greater_equal: {:real, :exact},
    less_equal: {:real, :exact},
    logical_and: {:all, :exact},
    logical_or: {:all, :exact},
    logical_xor: {:all, :exact}
  ]

  defp binary do
    for {op, {types, kind}} <- @binary do
      {"Nx.#{op}", 3, fn -> binary_call(op, types, kind) end}
    end
  end

  defp binary_call(op, types, kind) do
    shape = shape()
    left = operand(op, types, shape, :left)
    right = operand(op, types, broadcastable(shape), :right)
    {left, right} = in_merged_range(left, right)
    {left, right} = {in_float_range(left, right), in_float_range(right, left)}
    # The broadcast operand on the left now and then (not for divisors and
    # shift amounts, kept in range above).
    swap? = op not in [:quotient, :remainder, :left_shift, :right_shift] and chance(0.2)
    {left, right} = if swap?, do: {right, left}, else: {left, right}
    out = apply(Nx, op, [ones(left), ones(right)])
    # Complex pow of a zero base: 0 in BinaryBackend, Inf+NaNi in C99.
    left =
      if op == :pow and match?({:c, _}, out.type) and is_struct(left, Nx.Tensor),
        do: Nx.select(Nx.equal(left, 0), Nx.tensor(1, type: left.type), left),
        else: left

    inputs = Enum.filter([left, right], &is_struct(&1, Nx.Tensor))
    same_types? = Enum.all?([left, right], &(is_struct(&1, Nx.Tensor) and &1.type == out.type))

    mode =
      cond do
        not float_out?(out.type) -> :exact
        kind == :nosign -> :exact_nosign
        # Complex division is not correctly rounded either way.
        kind == :rounded and match?({:c, _}, out.type) -> {:tol, 4, 4}
        kind == :rounded and same_types? -> rounded(out)
        # Mixed types or a literal: Emily converts operands to the output
        # type first, BinaryBackend computes in f64: a rounding of the
        # operands, relative to their magnitude.
        kind == :rounded -> {:tol, 2, 2}
        # Complex pow is exp(y log x): the error grows with |y log x|.
        # (|y log x| reaches ~500 here: ~2^12 ulps).
        op == :pow and match?({:c, _}, out.type) -> {:tol, 4096, 8}
        true -> @math_tol
      end

    ref = if op in [:pow, :remainder, :atan2, :divide], do: Ref.binary(op, left, right, out.type)

    call("Nx.#{op}", [left, right], &apply(Nx, op, &1),
      mode: mode,
      scale: Ref.max_abs(inputs) + 1.0,
      ref: ref
    )
  end

  # u64 with a signed type merges to s64: values above the s64 maximum
  # compare as Elixir integers in BinaryBackend (u64 max > 1) and as
  # wrapped s64 in Emily (-1 < 1). Which is right is Nx's call; those
  # values are left out.
  defp in_merged_range(%Nx.Tensor{type: {:s, _}} = l, %Nx.Tensor{type: {:u, 64}} = r),
    do: {l, Nx.min(r, 1000)}

  defp in_merged_range(%Nx.Tensor{type: {:u, 64}} = l, %Nx.Tensor{type: {:s, _}} = r),
    do: {Nx.min(l, 1000), r}

  defp in_merged_range(l, r), do: {l, r}

  # An operand of an op computed in f16/bf16 whose values the 16-bit type
  # cannot hold: Emily converts it first (s32 -2147483648 and bf16 -3.4e38
  # become -Inf in f16), BinaryBackend computes on the exact value; kept
  # within the float's range.
  defp in_float_range(%Nx.Tensor{type: {k, _}} = int, %Nx.Tensor{type: {fk, 16}})
       when k in [:s, :u] and fk in [:f, :bf],
       do: Nx.clip(int, 0, 1000) |> Nx.as_type(int.type)

  defp in_float_range(%Nx.Tensor{type: {k, _} = type} = x, %Nx.Tensor{type: {:f, 16}})
       when k in [:f, :bf] and type != {:f, 16},
       do: Nx.clip(x, -1000, 1000) |> Nx.as_type(type)

  defp in_float_range(operand, _other), do: operand

  # The output type of an op, from operands of ones (the op itself may
  # raise on the real operands).
  defp ones(%Nx.Tensor{} = t),
    do: Nx.broadcast(Nx.tensor(1, type: t.type, backend: Nx.BinaryBackend), t.shape)

  defp ones(%Complex{}), do: Complex.new(1.0, 0.0)
  defp ones(n) when is_float(n), do: 1.0
  defp ones(_n), do: 1

  # Integer divisors and shift amounts stay in range (division by zero and
  # shifts past the width are undefined in Nx: BinaryBackend raises or
  # uses Elixir's bignum semantics).
  defp operand(op, types, shape, side) do
    type = pick(types_of(types))

    cond do
      side == :right and op in [:quotient, :remainder] and type in int_types() ->
        tensor(type, shape, range: if(elem(type, 0) == :u, do: {1, 9}, else: {1, 9}), edges: 0.0)

      side == :right and op in [:left_shift, :right_shift] ->
        tensor(type, shape, range: {0, elem(type, 1) - 1}, edges: 0.0)

      # pow: moderate operands, no edges. BinaryBackend raises on overflow
      # and on most IEEE special cases (pow(-Inf, 0.001), pow(0.7, Inf),
      # pow(1, -Inf) = 0), where Emily follows C's pow; Reference.binary/4
      # corrects the common ones, the rest are left out.
      op == :pow ->
        tensor(type, shape, range: {0, 4}, domain: {-4.0, 4.0}, edges: 0.0)

      side == :right and
        op not in [:quotient, :left_shift, :right_shift, :bitwise_and, :bitwise_or, :bitwise_xor] and
          chance(0.2) ->
        lit =
          literal(
            if types == :all, do: pick([:int, :float, :complex]), else: pick([:int, :float])
          )

        # An integer to a negative integer power is undefined in Nx
        # (BinaryBackend raises, Emily gives 0).
        if op == :pow and is_integer(lit), do: abs(lit), else: lit

      true ->
        tensor(type, shape)
    end
  end

  ## Reductions

  defp reductions do
    # logsumexp of integers is left out: Nx's composition subtracts the
    # max in the integer type (wrapping for unsigned types), so
    # BinaryBackend raises on exp of a huge number where Emily gives Inf.
    simple =
      for op <- [:sum, :product, :reduce_max, :reduce_min, :all, :any, :mean, :logsumexp] do
        {"Nx.#{op}", 3,
         fn ->
           types =
             case op do
               :logsumexp -> float_types()
               op when op in [:reduce_max, :reduce_min] -> real_types()
               _ -> all_types()
             end

           # No edges for logsumexp (BinaryBackend raises on Inf - Inf) nor
           # product (it raises on overflow: 516.6 * -1.8e308).
           t =
             tensor(pick(types), shape(),
               edges: if(op in [:logsumexp, :product], do: 0.0, else: 0.05)
             )

           opts = axes_opts(t) ++ if(bool(), do: [keep_axes: true], else: [])
           ref = if op in [:all, :any], do: Ref.all_any(t, opts)

           call("Nx.#{op}", [t], &apply(Nx, op, &1 ++ [opts]),
             opts: opts,
             mode: reduction_mode(op, t),
             scale: Ref.sum_abs(t) + 1.0,
             ref: ref
           )
         end}
      end

    args =
      for op <- [:argmax, :argmin] do
        {"Nx.#{op}", 3,
         fn ->
           # Small integers make ties, so tie_break matters.
           t = tensor(pick(real_types()), shape(), range: {0, 3}, edges: 0.05)

           axis =
             if bool() and t.shape != {}, do: [axis: int(0, tuple_size(t.shape) - 1)], else: []

           opts = axis ++ [tie_break: pick([:low, :high]), keep_axis: bool() and axis != []]
           call("Nx.#{op}", [t], &apply(Nx, op, &1 ++ [opts]), opts: opts)
         end}
      end

    stats =
      for op <- [:variance, :standard_deviation] do
        {"Nx.#{op}", 2,
         fn ->
           t = tensor(pick(float_types()), shape(), edges: 0.0)
           opts = axes_opts(t) ++ [ddof: int(0, 1), keep_axes: bool()]

           call("Nx.#{op}", [t], &apply(Nx, op, &1 ++ [opts]),
             opts: opts,
             mode: {:tol, 64, 64},
             scale: Ref.sum_abs(Nx.multiply(t, t)) + 1.0
           )
         end}
      end

    others = [
      {"Nx.median", 2,
       fn ->
         t = tensor(pick(real_types()), shape(1), edges: 0.0)

         opts =
           if bool(), do: [axis: int(0, tuple_size(t.shape) - 1), keep_axis: bool()], else: []

         call("Nx.median", [t], &apply(Nx, :median, &1 ++ [opts]), opts: opts, mode: {:tol, 2, 0})
       end},
      {"Nx.mode", 1,
       fn ->
         t = tensor(pick(int_types()), shape(1), range: {0, 3}, edges: 0.0)
         opts = if bool(), do: [axis: int(0, tuple_size(t.shape) - 1)], else: []
         call("Nx.mode", [t], &apply(Nx, :mode, &1 ++ [opts]), opts: opts)
       end},
      {"Nx.weighted_mean", 1,
       fn ->
         t = tensor(pick(float_types()), shape(1), edges: 0.0)
         w = tensor(t.type, t.shape, domain: {0.1, 2.0}, edges: 0.0)

         call("Nx.weighted_mean", [t, w], &apply(Nx, :weighted_mean, &1),
           mode: {:tol, 16, 16},
           scale: Ref.sum_abs(t) * 2 + 1.0
         )
       end},
      {"Nx.reduce", 2,
       fn ->
         t = tensor(pick(real_types()), shape(1), edges: 0.0)
         opts = axes_opts(t) ++ [keep_axes: bool()]
         fun = fn [t] -> Nx.reduce(t, 0, opts, &Nx.add/2) end
         # BinaryBackend's reduce raises on the s32 accumulator the add gives
         # for small integer types; the sum in the input's type is the same.
         ref = fn [t] -> t |> Nx.sum(opts) |> Nx.as_type(t.type) end

         call("Nx.reduce (add)", [t], fun,
           opts: opts,
           mode: reduction_mode(:sum, t),
           scale: Ref.sum_abs(t) + 1.0,
           ref: ref
         )
       end},
      {"Nx.all_close", 1,
       fn ->
         a = tensor(pick(float_types()), shape())

         b =
           Nx.add(a, tensor(a.type, a.shape, domain: {-1.0e-4, 1.0e-4}, edges: 0.0, names: false))

         opts = [equal_nan: bool()]
         call("Nx.all_close", [a, b], &apply(Nx, :all_close, &1 ++ [opts]), opts: opts)
       end}
    ]

    simple ++ args ++ stats ++ others
  end

  defp axes_opts(%{shape: shape}) do
    rank = tuple_size(shape)

    if rank > 0 and bool() do
      # A negative axis now and then: Nx normalizes it.
      axes =
        subset(Enum.to_list(0..(rank - 1))) |> Enum.map(&if(chance(0.2), do: &1 - rank, else: &1))

      [axes: axes]
    else
      []
    end
  end

  defp reduction_mode(op, t) do
    cond do
      op in [:reduce_max, :reduce_min, :all, :any] -> :exact
      not float_out?(t.type) and op in [:sum, :product] -> :exact
      op == :product -> {:tol, 4 * Nx.size(t), 0}
      true -> {:tol, 8, 8}
    end
  end

  defp cumulative do
    for op <- [:cumulative_sum, :cumulative_product, :cumulative_max, :cumulative_min] do
      {"Nx.#{op}", 2,
       fn ->
         types = if op in [:cumulative_max, :cumulative_min], do: real_types(), else: all_types()
         # No edges for the product: an f16 product that overflows midway is
         # Inf in Emily (f16 steps) but finite in BinaryBackend (f64 steps).
         t =
           tensor(pick(types), shape(1),
             edges: if(op == :cumulative_product, do: 0.0, else: 0.05)
           )

         opts = [axis: int(0, tuple_size(t.shape) - 1), reverse: bool()]
         exact? = op in [:cumulative_max, :cumulative_min] or not float_out?(t.type)
         mode = if exact?, do: :exact, else: {:tol, 4 * Nx.size(t), 8}

         call("Nx.#{op}", [t], &apply(Nx, op, &1 ++ [opts]),
           opts: opts,
           mode: mode,
           scale: Ref.sum_abs(t) + 1.0
         )
       end}
    end
  end

  ## Ordering

  defp ordering do
    [
      {"Nx.sort", 3,
       fn ->
         t = tensor(pick(real_types()), shape(1), range: {0, 5}, edges: 0.1)
         opts = [axis: int(0, tuple_size(t.shape) - 1), direction: pick([:asc, :desc])]
         call("Nx.sort", [t], &apply(Nx, :sort, &1 ++ [opts]), opts: opts, mode: :exact_nosign)
       end},
      {"Nx.argsort", 3,
       fn ->
         # Ties (small integers) with stable: true have one answer.
         t = tensor(pick(real_types()), shape(1), range: {0, 3}, edges: 0.0)

         opts = [
           axis: int(0, tuple_size(t.shape) - 1),
           direction: pick([:asc, :desc]),
           stable: true,
           type: pick([:s32, :s64, :u32])
         ]

         call("Nx.argsort", [t], &apply(Nx, :argsort, &1 ++ [opts]), opts: opts)
       end},
      {"Nx.top_k", 2,
       fn ->
         t = tensor(pick(real_types()), shape(1), edges: 0.0)
         opts = [k: int(1, elem(t.shape, tuple_size(t.shape) - 1))]
         call("Nx.top_k", [t], &apply(Nx, :top_k, &1 ++ [opts]), opts: opts)
       end}
    ]
  end

  ## Shapes

  defp shapes do
    [
      {"Nx.reshape", 2,
       fn ->
         t = tensor(pick(all_types()), shape())
         new = Ref.factor_shape(Nx.size(t))
         call("Nx.reshape", [t], &Nx.reshape(hd(&1), new), opts: [shape: new])
       end},
      {"Nx.transpose", 2,
       fn ->
         t = tensor(pick(all_types()), shape(1, 4, 3))
         axes = Enum.shuffle(Nx.axes(t))
         call("Nx.transpose", [t], &Nx.transpose(hd(&1), axes: axes), opts: [axes: axes])
       end},
      {"Nx.squeeze", 1,
       fn ->
         t = tensor(pick(all_types()), shape(1, 4, 2))
         ones = for {1, i} <- Enum.with_index(Tuple.to_list(t.shape)), do: i
         opts = if bool(), do: [axes: subset(ones)], else: []
         call("Nx.squeeze", [t], &Nx.squeeze(hd(&1), opts), opts: opts)
       end},
      {"Nx.new_axis", 1,
       fn ->
         t = tensor(pick(all_types()), shape())
         axis = int(0, tuple_size(t.shape))
         call("Nx.new_axis", [t], &Nx.new_axis(hd(&1), axis), opts: [axis: axis])
       end},
      {"Nx.broadcast", 2,
       fn ->
         to = shape(1)
         t = tensor(pick(all_types()), broadcastable(to), names: false)
         call("Nx.broadcast", [t], &Nx.broadcast(hd(&1), to), opts: [shape: to])
       end},
      {"Nx.pad", 3,
       fn ->
         t = tensor(pick(all_types()), shape(1, 3, 3))
         config = for d <- Tuple.to_list(t.shape), do: pad_config(d)
         value = pick([0, 1, -1.5, :tensor])

         value =
           if value == :tensor, do: tensor(pick(real_types()), {}, names: false), else: value

         call("Nx.pad", [t, value], &Nx.pad(hd(&1), List.last(&1), config),
           opts: [config: config],
           ref: Ref.pad(t, value, config)
         )
       end},
      {"Nx.reverse", 1,
       fn ->
         t = tensor(pick(all_types()), shape(1))
         opts = if bool(), do: [axes: subset(Nx.axes(t))], else: []
         call("Nx.reverse", [t], &Nx.reverse(hd(&1), opts), opts: opts)
       end},
      {"Nx.concatenate", 2,
       fn ->
         base = shape(1)
         axis = int(0, tuple_size(base) - 1)

         ts =
           for _ <- 1..int(1, 3),
               do: tensor(pick(real_types()), put_elem(base, axis, int(1, 3)), names: false)

         call("Nx.concatenate", ts, &Nx.concatenate(&1, axis: axis), opts: [axis: axis])
       end},
      {"Nx.stack", 1,
       fn ->
         base = shape()
         axis = int(0, tuple_size(base))
         ts = for _ <- 1..int(1, 3), do: tensor(pick(real_types()), base, names: false)
         call("Nx.stack", ts, &Nx.stack(&1, axis: axis), opts: [axis: axis])
       end},
      {"Nx.slice", 3,
       fn ->
         t = tensor(pick(all_types()), shape(1))
         {starts, lengths} = slice_spec(t.shape)
         strides = for _ <- starts, do: int(1, 2)
         # Out-of-range starts are clamped by Nx.
         call("Nx.slice", [t], &Nx.slice(hd(&1), starts, lengths, strides: strides),
           opts: [starts: starts, lengths: lengths, strides: strides]
         )
       end},
      {"Nx.slice (tensor starts)", 1,
       fn ->
         t = tensor(pick(real_types()), shape(1))
         {starts, lengths} = slice_spec(t.shape)
         starts = Enum.map(starts, &Nx.tensor(&1 + int(-1, 2), backend: Nx.BinaryBackend))

         call("Nx.slice", [t | starts], fn [t | s] -> Nx.slice(t, s, lengths) end,
           opts: [lengths: lengths]
         )
       end},
      {"Nx.put_slice", 2,
       fn ->
         t = tensor(pick(real_types()), shape(1), names: false)
         {starts, lengths} = slice_spec(t.shape)
         u = tensor(pick(real_types()), List.to_tuple(lengths), names: false)
         starts = Enum.map(starts, &(&1 + int(0, 2)))

         call("Nx.put_slice", [t, u], fn [t, u] -> Nx.put_slice(t, starts, u) end,
           opts: [starts: starts]
         )
       end},
      {"Nx.slice_along_axis", 1,
       fn ->
         t = tensor(pick(real_types()), shape(1))
         axis = int(0, tuple_size(t.shape) - 1)
         d = elem(t.shape, axis)
         start = int(0, d - 1)
         opts = [axis: axis, strides: int(1, 2)]
         len = int(1, d - start)

         call("Nx.slice_along_axis", [t], &Nx.slice_along_axis(hd(&1), start, len, opts),
           opts: [start: start, length: len] ++ opts
         )
       end},
      {"Nx.tile", 1,
       fn ->
         t = tensor(pick(real_types()), shape(0, 2, 3), names: false)
         reps = for _ <- 1..int(max(1, tuple_size(t.shape)), 3), do: int(1, 2)
         call("Nx.tile", [t], &Nx.tile(hd(&1), reps), opts: [reps: reps])
       end},
      {"Nx.flatten", 1,
       fn ->
         t = tensor(pick(all_types()), shape(1))
         call("Nx.flatten", [t], &Nx.flatten(hd(&1)))
       end},
      {"Nx.split", 1,
       fn ->
         t = tensor(pick(real_types()), shape(1))
         axis = int(0, tuple_size(t.shape) - 1)
         n = int(1, elem(t.shape, axis))
         call("Nx.split", [t], &Nx.split(hd(&1), n, axis: axis), opts: [split: n, axis: axis])
       end},
      {"Nx.tril/triu", 2,
       fn ->
         t = tensor(pick(real_types()), shape(2, 3))
         {op, k} = {pick([:tril, :triu]), int(-2, 2)}
         call("Nx.#{op}", [t], &apply(Nx, op, [hd(&1), [k: k]]), opts: [k: k])
       end},
      {"Nx.take_diagonal", 1,
       fn ->
         t = tensor(pick(real_types()), shape(2, 3), names: false)

         {rows, cols} =
           {elem(t.shape, tuple_size(t.shape) - 2), elem(t.shape, tuple_size(t.shape) - 1)}

         offset = int(1 - rows, cols - 1)

         call("Nx.take_diagonal", [t], &Nx.take_diagonal(hd(&1), offset: offset),
           opts: [offset: offset]
         )
       end},
      {"Nx.make_diagonal", 1,
       fn ->
         t = tensor(pick(real_types()), shape(1, 2, 3), names: false)
         offset = int(-2, 2)

         call("Nx.make_diagonal", [t], &Nx.make_diagonal(hd(&1), offset: offset),
           opts: [offset: offset]
         )
       end},
      {"Nx.put_diagonal", 1,
       fn ->
         t = tensor(pick(real_types()), shape(2, 2), names: false)
         {r, c} = t.shape
         offset = int(1 - r, c - 1)
         len = if offset >= 0, do: min(r, c - offset), else: min(r + offset, c)
         d = tensor(pick(real_types()), {len}, names: false)

         call("Nx.put_diagonal", [t, d], fn [t, d] -> Nx.put_diagonal(t, d, offset: offset) end,
           opts: [offset: offset]
         )
       end},
      {"Nx.diff", 1,
       fn ->
         t = tensor(pick(real_types()), shape(1))
         axis = int(0, tuple_size(t.shape) - 1)
         order = int(0, elem(t.shape, axis) - 1)

         call("Nx.diff", [t], &Nx.diff(hd(&1), axis: axis, order: order),
           opts: [axis: axis, order: order],
           mode: {:tol, 4, 4},
           scale: Ref.max_abs([t]) * 4
         )
       end},
      {"Nx.pad_outer", 1,
       fn ->
         t = tensor(pick(real_types()), shape(1, 2))
         config = for _ <- Tuple.to_list(t.shape), do: {int(0, 3), int(0, 3)}
         mode = pick([:cyclic, :mirror, :replicate, :reflect])

         call("Nx.pad_outer", [t], &Nx.pad_outer(hd(&1), mode, config),
           opts: [mode: mode, config: config]
         )
       end},
      {"Nx.select", 3,
       fn ->
         s = shape()
         pred = tensor(pick([:u8, :s32, :f32]), broadcastable(s), range: {0, 1}, names: false)
         on_true = tensor(pick(all_types()), broadcastable(s), names: false)

         on_false =
           if bool(), do: tensor(pick(all_types()), s, names: false), else: literal(:float)

         call("Nx.select", [pred, on_true, on_false], &apply(Nx, :select, &1))
       end},
      {"Nx.clip", 2,
       fn ->
         t = tensor(pick(real_types()), shape())
         type = if Nx.Type.integer?(t.type), do: t.type, else: pick(float_types())
         lo = tensor(type, {}, edges: 0.0, names: false)

         hi =
           Nx.add(
             lo,
             tensor(type, {}, range: {0, 10}, domain: {0.0, 10.0}, edges: 0.0, names: false)
           )

         call("Nx.clip", [t, lo, hi], &apply(Nx, :clip, &1),
           mode: :exact_nosign,
           ref: Ref.clip(t)
         )
       end}
    ]
  end

  defp pad_config(dim) do
    interior = int(0, 2)
    full = dim + (dim - 1) * interior
    # Negative edges remove elements; keep at least one.
    lo = int(-min(2, full - 1), 2)
    hi = int(-min(2, full - 1 + min(lo, 0)), 2)
    {lo, hi, interior}
  end

  defp slice_spec(shape) do
    dims = Tuple.to_list(shape)
    lengths = Enum.map(dims, &int(1, &1))
    starts = Enum.zip_with(dims, lengths, fn d, l -> int(0, d - l) end)
    {starts, lengths}
  end

  ## Indexing

  defp indexing do
    [
      {"Nx.gather", 2,
       fn ->
         t = tensor(pick(all_types()), shape(1, 3, 3), names: false)

         axes =
           if bool(), do: Enum.take(Nx.axes(t), int(1, tuple_size(t.shape))), else: Nx.axes(t)

         idx = index_tensor(t.shape, axes)

         call("Nx.gather", [t, idx], fn [t, i] -> Nx.gather(t, i, axes: axes) end,
           opts: [axes: axes]
         )
       end},
      {"Nx.take", 2,
       fn ->
         t = tensor(pick(all_types()), shape(1, 3, 3), names: false)
         axis = int(0, tuple_size(t.shape) - 1)
         idx = indices(shape(0, 2, 3), elem(t.shape, axis))
         call("Nx.take", [t, idx], fn [t, i] -> Nx.take(t, i, axis: axis) end, opts: [axis: axis])
       end},
      {"Nx.take_along_axis", 2,
       fn ->
         t = tensor(pick(real_types()), shape(1, 3, 3), names: false)
         axis = int(0, tuple_size(t.shape) - 1)
         idx = indices(put_elem(t.shape, axis, int(1, 4)), elem(t.shape, axis))

         call(
           "Nx.take_along_axis",
           [t, idx],
           fn [t, i] -> Nx.take_along_axis(t, i, axis: axis) end,
           opts: [axis: axis]
         )
       end},
      {"Nx.indexed_add", 2, fn -> indexed(:indexed_add) end},
      {"Nx.indexed_put", 2, fn -> indexed(:indexed_put) end}
    ]
  end

  # Indices {n, length(axes)} into `shape` (duplicates allowed).
  defp index_tensor(shape, axes) do
    n = int(1, 4)
    cols = for a <- axes, do: indices({n, 1}, elem(shape, a), {:s, 64})
    Nx.concatenate(cols, axis: 1) |> Nx.as_type(pick([:s32, :s64, :u16]))
  end

  defp indexed(op) do
    t = tensor(pick(real_types()), shape(1, 3, 3), names: false, edges: 0.0)
    axes = if bool(), do: Enum.take(Nx.axes(t), int(1, tuple_size(t.shape))), else: Nx.axes(t)
    idx = index_tensor(t.shape, axes)
    # indexed_put with duplicate indices has no defined winner: unique rows.
    idx = if op == :indexed_put, do: Ref.unique_rows(idx), else: idx
    rest = for {d, i} <- Enum.with_index(Tuple.to_list(t.shape)), i not in axes, do: d

    upd =
      tensor(pick(real_types()), List.to_tuple([elem(idx.shape, 0) | rest]),
        names: false,
        edges: 0.0
      )

    out = apply(Nx, op, [t, idx, upd, [axes: axes]])
    mode = if float_out?(out.type) and op == :indexed_add, do: {:tol, 4, 4}, else: :exact

    call("Nx.#{op}", [t, idx, upd], fn [t, i, u] -> apply(Nx, op, [t, i, u, [axes: axes]]) end,
      opts: [axes: axes],
      mode: mode,
      scale: Ref.max_abs([t, upd]) * 4
    )
  end

  ## Creation (computed on the backend itself)

  defp creation do
    [
      {"Nx.iota", 1,
       fn ->
         s = shape(1)

         opts =
           [type: pick(all_types()), axis: pick([nil | Nx.axes(s)])]
           |> Enum.reject(&(elem(&1, 1) == nil))

         call("Nx.iota", [:backend], &Nx.iota(s, opts ++ [backend: hd(&1)]),
           opts: [shape: s] ++ opts
         )
       end},
      {"Nx.eye", 1,
       fn ->
         s = shape(2, 3)
         type = pick(all_types())

         call("Nx.eye", [:backend], &Nx.eye(s, type: type, backend: hd(&1)),
           opts: [shape: s, type: type]
         )
       end},
      {"Nx.tri", 1,
       fn ->
         {n, m, k} = {int(1, 5), int(1, 5), int(-2, 2)}

         call("Nx.tri", [:backend], &Nx.tri(n, m, k: k, backend: hd(&1)),
           opts: [n: n, m: m, k: k]
         )
       end},
      {"Nx.linspace", 1,
       fn ->
         {a, b, n} = {uniform(-5.0, 5.0), uniform(-5.0, 5.0), int(1, 10)}
         opts = [n: n, type: pick(float_types()), endpoint: bool()]

         call("Nx.linspace", [:backend], &Nx.linspace(a, b, opts ++ [backend: hd(&1)]),
           opts: [start: a, stop: b] ++ opts,
           mode: {:tol, 4, 16},
           scale: 5.0
         )
       end},
      {"Nx.fill", 1,
       fn ->
         t = tensor(pick(real_types()), shape())
         v = literal(pick([:int, :float]))
         call("Nx.fill", [t], &Nx.fill(hd(&1), v), opts: [value: v], mode: rounded(t))
       end},
      {"Nx.to_binary/from_binary", 2,
       fn ->
         t = tensor(pick(all_types()), shape())

         # The round trip runs on each backend (t.data is its struct).
         fun = fn [t] ->
           Nx.from_binary(Nx.to_binary(t), t.type, backend: t.data.__struct__)
           |> Nx.reshape(t.shape)
         end

         call("Nx.to_binary |> Nx.from_binary", [t], fun)
       end}
    ]
  end

  ## Types

  defp types do
    [
      {"Nx.as_type", 4,
       fn ->
         from = pick(all_types())
         to = pick(all_types())
         # Float -> integer conversion of NaN, Inf and out-of-range values
         # is undefined (BinaryBackend wraps, Emily saturates): in range.
         opts =
           if Nx.Type.integer?(to) and not Nx.Type.integer?(from),
             do: [edges: 0.0, domain: int_domain(to)],
             else: [domain: {-300.0, 300.0}]

         t = tensor(from, shape(), opts)

         call("Nx.as_type", [t], &Nx.as_type(hd(&1), to),
           opts: [type: to],
           ref: Ref.as_type(t, to),
           mode: as_type_mode(from, to)
         )
       end},
      {"Nx.bitcast", 2,
       fn ->
         from = pick(all_types())
         {_, bits} = from
         to = pick(for {_, b} = ty <- all_types(), b == bits, do: ty)
         t = tensor(from, shape())
         call("Nx.bitcast", [t], &Nx.bitcast(hd(&1), to), opts: [type: to])
       end}
    ]
  end

  defp int_domain({:u, 8}), do: {0.0, 255.0}
  defp int_domain({:u, _}), do: {0.0, 1000.0}
  defp int_domain({:s, 8}), do: {-128.0, 127.0}
  defp int_domain({:s, _}), do: {-1000.0, 1000.0}

  # f64 (and wide int) -> bf16 may round twice in either implementation:
  # one ulp.
  defp as_type_mode(from, {:bf, 16})
       when from in [{:f, 64}, {:s, 64}, {:u, 64}, {:s, 32}, {:u, 32}],
       do: {:tol, 1, 0}

  defp as_type_mode(_from, _to), do: :exact

  ## Contractions

  defp contractions do
    [
      {"Nx.dot", 4,
       fn ->
         {batch, contract, m, n} =
           {Enum.take([int(1, 3)], int(0, 1)), [int(1, 4)], int(1, 3), int(1, 3)}

         type_a = pick(all_types())
         type_b = if bool(), do: type_a, else: pick(all_types())
         a = tensor(type_a, List.to_tuple(batch ++ [m] ++ contract), edges: 0.0, names: false)
         b = tensor(type_b, List.to_tuple(batch ++ contract ++ [n]), edges: 0.0, names: false)
         nb = length(batch)

         {ca, ba, cb, bb} =
           {[nb + 1], Enum.to_list(0..(nb - 1)//1), [nb], Enum.to_list(0..(nb - 1)//1)}

         out = Nx.dot(a, ca, ba, b, cb, bb)
         mode = if float_out?(out.type), do: {:tol, 8, 8}, else: :exact

         call("Nx.dot", [a, b], fn [a, b] -> Nx.dot(a, ca, ba, b, cb, bb) end,
           opts: [contract_a: ca, batch_a: ba, contract_b: cb, batch_b: bb],
           mode: mode,
           scale: Ref.max_abs([a]) * Ref.max_abs([b]) * hd(contract) + 1.0
         )
       end},
      {"Nx.dot (vectors/scalars)", 1,
       fn ->
         n = int(1, 6)
         a = tensor(pick(real_types()), pick([{n}, {}]), edges: 0.0, names: false)
         b = tensor(pick(real_types()), pick([{n}, {}, {n, 2}]), edges: 0.0, names: false)
         out_type = Nx.Type.merge(a.type, b.type)
         mode = if float_out?(out_type), do: {:tol, 8, 8}, else: :exact

         call("Nx.dot", [a, b], &apply(Nx, :dot, &1),
           mode: mode,
           scale: Ref.max_abs([a]) * Ref.max_abs([b]) * n + 1.0
         )
       end},
      {"Nx.outer", 1,
       fn ->
         # No edges: BinaryBackend raises on overflow (1.8e308 * 9).
         a = tensor(pick(real_types()), shape(1, 2, 3), names: false, edges: 0.0)
         b = tensor(pick(real_types()), shape(1, 1, 4), names: false, edges: 0.0)
         mode = if float_out?(Nx.Type.merge(a.type, b.type)), do: {:tol, 2, 2}, else: :exact

         call("Nx.outer", [a, b], &apply(Nx, :outer, &1),
           mode: mode,
           scale: Ref.max_abs([a, b]) + 1.0
         )
       end},
      {"Nx.conv", 4, &conv/0}
    ]
  end

  defp conv do
    rank = int(1, 2)
    groups = int(1, 2)
    batch_groups = if groups == 1 and bool(), do: int(1, 2), else: 1
    n = batch_groups * int(1, 2)
    c_in = groups * int(1, 2)
    c_out = groups * batch_groups * int(1, 2)
    spatial = for _ <- 1..rank, do: int(2, 5)
    kernel = for s <- spatial, do: int(1, min(3, s))
    type = pick([{:f, 32}, {:f, 64}, {:f, 16}, {:bf, 16}, {:s, 32}, {:c, 64}])

    input =
      tensor(type, List.to_tuple([n, c_in | spatial]),
        edges: 0.0,
        names: false,
        domain: {-2.0, 2.0}
      )

    k =
      tensor(type, List.to_tuple([c_out, div(c_in, groups) | kernel]),
        edges: 0.0,
        names: false,
        domain: {-2.0, 2.0}
      )

    opts =
      [
        strides: for(_ <- spatial, do: int(1, 2)),
        padding: pick([:valid, :same, for(_ <- spatial, do: {int(-1, 2), int(0, 2)})]),
        input_dilation: for(_ <- spatial, do: int(1, 2)),
        kernel_dilation: for(_ <- spatial, do: int(1, 2)),
        feature_group_size: groups,
        batch_group_size: batch_groups
      ]
      |> subset()

    mode = if float_out?(type), do: {:tol, 16, 16}, else: :exact
    terms = div(c_in, groups) * Enum.product(kernel)

    call("Nx.conv", [input, k], fn [i, k] -> Nx.conv(i, k, opts) end,
      opts: opts,
      mode: mode,
      scale: 4.0 * terms
    )
  end

  ## Windows

  defp windows do
    ops =
      for op <- [:window_sum, :window_product, :window_max, :window_min, :window_mean] do
        {"Nx.#{op}", 2,
         fn ->
           t =
             tensor(pick(real_types()), shape(1, 3),
               edges: 0.05,
               domain: {-2.0, 2.0},
               names: false
             )

           {window, opts} = window_spec(t.shape)

           exact? =
             op in [:window_max, :window_min] or (not float_out?(t.type) and op != :window_mean)

           mode = if exact?, do: :exact, else: {:tol, 8 * Tuple.product(window), 8}

           call("Nx.#{op}", [t], &apply(Nx, op, [hd(&1), window, opts]),
             opts: [window: window] ++ opts,
             mode: mode,
             scale: Ref.max_abs([t]) * Tuple.product(window) + 1.0
           )
         end}
      end

    scatter =
      for op <- [:window_scatter_max, :window_scatter_min] do
        {"Nx.#{op}", 1,
         fn ->
           # Distinct values: with ties the chosen position is backend-defined.
           t = Ref.distinct(pick([{:f, 32}, {:s, 32}, {:f, 64}]), shape(1, 2))
           {window, opts} = window_spec(t.shape)
           # No padding: where the window covers padding, BinaryBackend
           # scatters to another element than Emily (scatter_min of [2, 1, 0],
           # window 2, strides 2, :same: BinaryBackend drops the second
           # source value, Emily puts it on the 0); Nx does not say what
           # the padding holds. Reported, not compared.
           opts = Keyword.drop(opts, [:window_dilations, :padding])
           out_shape = Nx.window_sum(t, window, opts).shape

           src =
             tensor(t.type, out_shape,
               edges: 0.0,
               names: false,
               range: {0, 5},
               domain: {0.0, 5.0}
             )

           # BinaryBackend rounds f64 sources through f32
           # (1.6279988075026197 comes back as 1.6279988288879395): f32
           # precision.
           call("Nx.#{op}", [t, src], fn [t, s] -> apply(Nx, op, [t, s, 0, window, opts]) end,
             opts: [window: window] ++ opts,
             mode: {:tol, 4, 4},
             scale: 20.0,
             eps_of: {:f, 32}
           )
         end}
      end

    reduce =
      {"Nx.window_reduce", 1,
       fn ->
         t = tensor(pick([{:s, 32}, {:f, 32}]), shape(1, 2), edges: 0.0, names: false)
         {window, opts} = window_spec(t.shape)
         fun = fn [t] -> Nx.window_reduce(t, 0, window, opts, fn a, b -> Nx.max(a, b) end) end
         call("Nx.window_reduce (max)", [t], fun, opts: [window: window] ++ opts)
       end}

    [reduce | ops ++ scatter]
  end

  defp window_spec(shape) do
    dims = Tuple.to_list(shape)
    window = for d <- dims, do: int(1, min(d, 3))

    opts =
      [
        strides: for(_ <- dims, do: int(1, 2)),
        padding: pick([:valid, :same, for(_ <- dims, do: {int(0, 1), int(0, 1)})]),
        window_dilations: for(_ <- dims, do: int(1, 2))
      ]
      |> subset()

    # Dilation may make the window larger than the (padded) input.
    dil = Keyword.get(opts, :window_dilations, Enum.map(dims, fn _ -> 1 end))

    window =
      Enum.zip_with([window, dims, dil], fn [w, d, l] ->
        if (w - 1) * l + 1 > d, do: 1, else: w
      end)

    {List.to_tuple(window), opts}
  end

  ## Linear algebra

  defp linalg do
    [
      {"Nx.LinAlg.determinant", 2,
       fn ->
         a =
           well_conditioned(
             pick([{:f, 32}, {:f, 64}, {:c, 64}]),
             Enum.take([2], int(0, 1)),
             int(1, 4)
           )

         call("Nx.LinAlg.determinant", [a], &apply(Nx.LinAlg, :determinant, &1),
           mode: {:tol, 64, 64},
           scale: Ref.det_scale(a)
         )
       end},
      {"Nx.LinAlg.invert", 2,
       fn ->
         a = well_conditioned(pick([{:f, 32}, {:f, 64}]), Enum.take([2], int(0, 1)), int(1, 4))
         call("Nx.LinAlg.invert", [a], &apply(Nx.LinAlg, :invert, &1), mode: {:tol, 64, 64})
       end},
      {"Nx.LinAlg.solve", 2,
       fn ->
         type = pick([{:f, 32}, {:f, 64}])
         n = int(1, 4)
         a = well_conditioned(type, [], n)

         b =
           tensor(type, pick([{n}, {n, int(1, 3)}]),
             edges: 0.0,
             names: false,
             domain: {-2.0, 2.0}
           )

         call("Nx.LinAlg.solve", [a, b], &apply(Nx.LinAlg, :solve, &1),
           mode: {:tol, 64, 64},
           scale: 4.0
         )
       end},
      {"Nx.LinAlg.triangular_solve", 2,
       fn ->
         type = pick([{:f, 32}, {:f, 64}])
         n = int(1, 4)
         opts = [lower: bool(), left_side: bool(), transform_a: pick([:none, :transpose])]

         a =
           well_conditioned(type, [], n)
           |> then(&if(opts[:lower], do: Nx.tril(&1), else: Nx.triu(&1)))

         b =
           tensor(type, pick([{n, int(1, 3)}, {n, n}]),
             edges: 0.0,
             names: false,
             domain: {-2.0, 2.0}
           )

         b = if opts[:left_side], do: b, else: Nx.transpose(b)

         call(
           "Nx.LinAlg.triangular_solve",
           [a, b],
           fn [a, b] -> Nx.LinAlg.triangular_solve(a, b, opts) end,
           opts: opts,
           mode: {:tol, 64, 64},
           scale: 4.0
         )
       end},
      {"Nx.LinAlg.cholesky", 2,
       fn ->
         a = spd(pick([{:f, 32}, {:f, 64}, {:c, 64}]), Enum.take([2], int(0, 1)), int(1, 4))
         # BinaryBackend's f64 Cholesky is good to ~1e-11 only (L L^T - A is
         # 2.7e-11 where Emily's is 8.9e-16): f32 precision.
         call("Nx.LinAlg.cholesky", [a], &apply(Nx.LinAlg, :cholesky, &1),
           mode: {:tol, 64, 64},
           scale: 4.0,
           eps_of: {:f, 32}
         )
       end},
      {"Nx.LinAlg.lu", 1,
       fn ->
         a = well_conditioned(pick([{:f, 32}, {:f, 64}]), [], int(1, 4))
         call("Nx.LinAlg.lu", [a], &apply(Nx.LinAlg, :lu, &1), mode: {:tol, 64, 64}, scale: 4.0)
       end},
      {"Nx.LinAlg.qr", 2,
       fn ->
         type = pick([{:f, 32}, {:f, 64}])
         {m, n} = {int(1, 4), int(1, 4)}
         a = tensor(type, {max(m, n), n}, edges: 0.0, names: false, domain: {-2.0, 2.0})
         opts = [mode: pick([:reduced, :complete])]

         call("Nx.LinAlg.qr", [a], fn [a] -> Nx.LinAlg.qr(a, opts) end,
           opts: opts,
           check: &Ref.check_qr(&1, &2, opts)
         )
       end},
      {"Nx.LinAlg.eigh", 2,
       fn ->
         a = spd(pick([{:f, 32}, {:f, 64}]), [], int(1, 4))
         call("Nx.LinAlg.eigh", [a], &apply(Nx.LinAlg, :eigh, &1), check: &Ref.check_eigh/2)
       end},
      {"Nx.LinAlg.svd", 2,
       fn ->
         type = pick([{:f, 32}, {:f, 64}])
         a = tensor(type, {int(1, 4), int(1, 4)}, edges: 0.0, names: false, domain: {-2.0, 2.0})
         call("Nx.LinAlg.svd", [a], &apply(Nx.LinAlg, :svd, &1), check: &Ref.check_svd/2)
       end},
      {"Nx.LinAlg.norm", 2,
       fn ->
         t =
           tensor(pick([{:f, 32}, {:f, 64}]), pick([{int(1, 5)}, {int(1, 3), int(1, 3)}]),
             edges: 0.0,
             names: false
           )

         ords =
           if tuple_size(t.shape) == 1,
             do: [nil, 1, 2, :inf, :neg_inf, 0, 3],
             else: [nil, :frobenius, :nuclear, 1, -1, :inf, :neg_inf, 2, -2]

         opts = Enum.reject([ord: pick(ords)], &(elem(&1, 1) == nil))

         call("Nx.LinAlg.norm", [t], &Nx.LinAlg.norm(hd(&1), opts),
           opts: opts,
           mode: {:tol, 256, 256},
           scale: Ref.sum_abs(t) + 1.0
         )
       end},
      {"Nx.LinAlg.matrix_power", 1,
       fn ->
         a =
           tensor(pick([{:s, 32}, {:f, 64}]), pick([{2, 2}, {3, 3}]),
             range: {-2, 2},
             domain: {-1.0, 1.0},
             edges: 0.0,
             names: false
           )

         p = int(0, 4)

         call("Nx.LinAlg.matrix_power", [a], &Nx.LinAlg.matrix_power(hd(&1), p),
           opts: [power: p],
           mode: {:tol, 64, 64}
         )
       end},
      {"Nx.LinAlg.pinv", 1,
       fn ->
         a = well_conditioned({:f, 64}, [], int(1, 3))
         # pinv of an invertible matrix is its inverse; BinaryBackend's own
         # pinv (through its SVD) is good to ~1e-7 only in f64.
         call("Nx.LinAlg.pinv", [a], &apply(Nx.LinAlg, :pinv, &1),
           mode: {:tol, 256, 256},
           ref: fn [a] -> Nx.LinAlg.invert(a) end
         )
       end}
    ]
  end

  ## Fourier transforms

  defp fft do
    one =
      for op <- [:fft, :ifft] do
        {"Nx.#{op}", 3,
         fn ->
           t =
             tensor(pick([{:f, 32}, {:f, 64}, {:c, 64}, {:c, 128}, {:s, 32}]), shape(1, 3),
               edges: 0.0,
               domain: {-2.0, 2.0}
             )

           axis = int(0, tuple_size(t.shape) - 1)
           opts = [axis: axis] ++ if(bool(), do: [length: int(1, 6)], else: [])
           mode = {:tol, 32, 32}

           call("Nx.#{op}", [t], &apply(Nx, op, [hd(&1), opts]),
             opts: opts,
             mode: mode,
             scale: Ref.sum_abs(t) + 1.0,
             ref: Ref.fft(op, t, opts)
           )
         end}
      end

    two =
      for op <- [:fft2, :ifft2] do
        {"Nx.#{op}", 2,
         fn ->
           t =
             tensor(pick([{:f, 32}, {:c, 64}, {:c, 128}]), shape(2, 3),
               edges: 0.0,
               domain: {-2.0, 2.0},
               names: false
             )

           rank = tuple_size(t.shape)

           axes =
             if rank > 2 and bool(),
               do: Enum.take_random(Nx.axes(t), 2) |> Enum.sort(),
               else: [rank - 2, rank - 1]

           opts = [axes: axes] ++ if(bool(), do: [lengths: [int(1, 4), int(1, 4)]], else: [])

           call("Nx.#{op}", [t], &apply(Nx, op, [hd(&1), opts]),
             opts: opts,
             mode: {:tol, 64, 64},
             scale: Ref.sum_abs(t) + 1.0,
             ref: Ref.fft2(op, t, opts)
           )
         end}
      end

    real = [
      {"Nx.rfft", 2,
       fn ->
         t =
           tensor(pick([{:f, 32}, {:f, 64}]), shape(1, 3),
             edges: 0.0,
             domain: {-2.0, 2.0},
             names: false
           )

         opts = if bool(), do: [length: int(1, 6)], else: []

         call("Nx.rfft", [t], &Nx.rfft(hd(&1), opts),
           opts: opts,
           mode: {:tol, 32, 32},
           scale: Ref.sum_abs(t) + 1.0,
           ref: Ref.rfft(t, opts)
         )
       end},
      {"Nx.irfft", 2,
       fn ->
         t =
           tensor(pick([{:c, 64}, {:c, 128}]), shape(1, 3),
             edges: 0.0,
             domain: {-2.0, 2.0},
             names: false
           )

         # Without :length a last axis of 1 asks for length 0 (Emily raises,
         # BinaryBackend returns one element): a length is given then.
         opts =
           if bool() or elem(t.shape, tuple_size(t.shape) - 1) == 1,
             do: [length: int(1, 6)],
             else: []

         call("Nx.irfft", [t], &Nx.irfft(hd(&1), opts),
           opts: opts,
           mode: {:tol, 32, 32},
           scale: Ref.sum_abs(t) + 1.0,
           ref: Ref.irfft(t, opts)
         )
       end}
    ]

    one ++ two ++ real
  end

  ## Random: the same key gives the same bits on both backends.

  defp random do
    shape_type = fn types -> {shape(), pick(types)} end

    [
      {"Nx.Random.key/split/fold_in", 1,
       fn ->
         k = Nx.Random.key(int(0, 1_000_000)) |> Nx.backend_copy(Nx.BinaryBackend)
         {op, arg} = pick([{:split, [parts: int(2, 4)]}, {:fold_in, int(0, 1000)}])
         call("Nx.Random.#{op}", [k], &apply(Nx.Random, op, [hd(&1), arg]), opts: [arg: arg])
       end},
      {"Nx.Random.randint", 2,
       fn ->
         k = Nx.Random.key(int(0, 1_000_000)) |> Nx.backend_copy(Nx.BinaryBackend)
         {s, type} = shape_type.(int_types())
         {lo, hi} = pick([{0, 10}, {-5, 5}, {0, 1}])
         lo = if elem(type, 0) == :u, do: 0, else: lo

         call("Nx.Random.randint", [k], &Nx.Random.randint(hd(&1), lo, hi, shape: s, type: type),
           opts: [min: lo, max: hi, shape: s, type: type]
         )
       end},
      {"Nx.Random.uniform", 2,
       fn ->
         k = Nx.Random.key(int(0, 1_000_000)) |> Nx.backend_copy(Nx.BinaryBackend)
         {s, type} = shape_type.(float_types())

         call("Nx.Random.uniform", [k], &Nx.Random.uniform(hd(&1), shape: s, type: type),
           opts: [shape: s, type: type]
         )
       end},
      {"Nx.Random.normal", 2,
       fn ->
         k = Nx.Random.key(int(0, 1_000_000)) |> Nx.backend_copy(Nx.BinaryBackend)
         {s, type} = shape_type.(float_types() ++ complex_types())
         # Nx.Random.normal goes through erf_inv: BinaryBackend's is good to
         # ~1e-7 in f64 (see Reference.unary(:erf_inv, _)), so f32 precision.
         eps_of = if type in [{:f, 64}, {:c, 128}], do: {:f, 32}

         call("Nx.Random.normal", [k], &Nx.Random.normal(hd(&1), shape: s, type: type),
           opts: [shape: s, type: type],
           mode: {:tol, 16, 16},
           eps_of: eps_of
         )
       end},
      {"Nx.Random.gumbel", 1,
       fn ->
         k = Nx.Random.key(int(0, 1_000_000)) |> Nx.backend_copy(Nx.BinaryBackend)
         {s, type} = shape_type.([{:f, 32}, {:f, 64}])

         call("Nx.Random.gumbel", [k], &Nx.Random.gumbel(hd(&1), shape: s, type: type),
           opts: [shape: s, type: type],
           mode: {:tol, 16, 16}
         )
       end},
      {"Nx.Random.shuffle", 1,
       fn ->
         k = Nx.Random.key(int(0, 1_000_000)) |> Nx.backend_copy(Nx.BinaryBackend)
         t = tensor(pick(real_types()), shape(1, 2), names: false)
         call("Nx.Random.shuffle", [k, t], fn [k, t] -> Nx.Random.shuffle(k, t) end)
       end}
    ]
  end
end

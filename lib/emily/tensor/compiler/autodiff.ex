defmodule Emily.Tensor.Compiler.Autodiff do
  @moduledoc """
  Reverse-mode automatic differentiation of functions of `Emily.Tensor`s.

  Emily's lazy graph is the trace: calling the function only builds engine
  nodes, and the engine's `em_vjp` walks that graph backwards, asking each
  primitive's rule for the cotangents of its inputs (DESIGN.md §3.7). The
  gradients come back as lazy tensors too, so the forward and backward
  passes evaluate together on the first read, and a `value_and_grad`
  traced inside `Emily.Tensor.Compiler.jit` becomes one compiled program.

      iex> f = fn x -> Emily.Tensor.sum(Emily.Tensor.multiply(x, x)) end
      iex> grad_f = Emily.Tensor.Compiler.Autodiff.grad(f)
      iex> grad_f.(Emily.Tensor.tensor([1.0, 2.0, 3.0])) |> Emily.Tensor.to_list()
      [2.0, 4.0, 6.0]

  ## Rules

    * Differentiated arguments may be tensors, numbers or containers
      (tuples, lists, maps, nested) of them; the gradient has the same
      structure. Integer tensors and numbers are differentiated as `f32`
      (as Nx, their gradient is a float tensor).
    * The function must return a scalar tensor unless a `:cotangent` is
      given. Gradients flow through real floats only: comparisons, argmax,
      integer arithmetic and random bits contribute zero (as in Nx). An op
      whose gradient rule is not written yet (linear algebra,
      window_scatter_*, conv with batch groups) raises `ArgumentError`
      "grad: no gradient rule for <op>"; complex values (FFT) raise as
      well.
    * Reading a value inside the function (`to_number/1`, `Emily.eval/1`)
      evaluates it and cuts the graph: a float value built inside the
      function, evaluated there and then used raises `ArgumentError`: the
      engine can no longer tell whether it depended on the arguments (wrap
      it in `stop_gradient/1` when a constant is meant). Integer values read inside (indices, argmax) are fine:
      they carry no gradient.
  """

  alias Emily.Native
  alias Emily.Tensor.Core

  @doc """
  Returns a function with `fun`'s arity that computes `{value, gradients}`.

  Options:

    * `:argnums` — the differentiated argument: an index (default `0`),
      whose gradient is returned as is, or a list of indices, whose
      gradients are returned as a tuple in that order.
    * `:cotangent` — the output's cotangent (a tensor of the output's
      shape); by default the output must be a scalar and the cotangent is 1.

  ## Examples

      iex> f = fn w, x -> Emily.Tensor.sum(Emily.Tensor.multiply(w, x)) end
      iex> {value, {gw, gx}} =
      ...>   Emily.Tensor.Compiler.Autodiff.value_and_grad(f, argnums: [0, 1]).(
      ...>     Emily.Tensor.tensor([1.0, 2.0]),
      ...>     Emily.Tensor.tensor([3.0, 4.0])
      ...>   )
      iex> {Emily.Tensor.to_number(value), Emily.Tensor.to_list(gw), Emily.Tensor.to_list(gx)}
      {11.0, [3.0, 4.0], [1.0, 2.0]}

  Containers of parameters keep their structure:

      iex> loss = fn %{w: w, b: b} -> Emily.Tensor.sum(Emily.Tensor.add(Emily.Tensor.multiply(w, 2.0), b)) end
      iex> {_value, grads} =
      ...>   Emily.Tensor.Compiler.Autodiff.value_and_grad(loss).(%{
      ...>     w: Emily.Tensor.tensor([1.0, 1.0]),
      ...>     b: Emily.Tensor.tensor(0.5)
      ...>   })
      iex> {Emily.Tensor.to_list(grads.w), Emily.Tensor.to_number(grads.b)}
      {[2.0, 2.0], 2.0}
  """
  def value_and_grad(fun, opts \\ []) when is_function(fun) and is_list(opts) do
    opts = Keyword.validate!(opts, argnums: 0, cotangent: nil)
    {:arity, arity} = Function.info(fun, :arity)
    argnums = List.wrap(opts[:argnums])

    Enum.each(argnums, fn i ->
      unless is_integer(i) and i >= 0 and i < arity do
        raise ArgumentError,
              "grad: argnums must be argument indices of a function of arity " <>
                "#{arity}, got: #{inspect(opts[:argnums])}"
      end
    end)

    run = fn args -> call(fun, args, opts[:argnums], opts[:cotangent]) end
    with_arity(arity, run)
  end

  @doc """
  Like `value_and_grad/2` but returns only the gradients.

  ## Examples

      iex> g = Emily.Tensor.Compiler.Autodiff.grad(fn x -> Emily.Tensor.exp(x) end)
      iex> g.(Emily.Tensor.tensor(0.0)) |> Emily.Tensor.to_number()
      1.0
  """
  def grad(fun, opts \\ []) when is_function(fun) and is_list(opts) do
    {:arity, arity} = Function.info(fun, :arity)
    vg = value_and_grad(fun, opts)
    with_arity(arity, fn args -> elem(apply(vg, args), 1) end)
  end

  @doc """
  Returns `tensor` unchanged, but no gradient flows through it: inside a
  differentiated function it is a constant. Containers are walked.

  ## Examples

      iex> f = fn x ->
      ...>   Emily.Tensor.sum(Emily.Tensor.multiply(x, Emily.Tensor.Compiler.Autodiff.stop_gradient(x)))
      ...> end
      iex> Emily.Tensor.Compiler.Autodiff.grad(f).(Emily.Tensor.tensor([3.0])) |> Emily.Tensor.to_list()
      [3.0]
  """
  def stop_gradient(container) do
    {out, nil} =
      map_leaves(container, nil, fn leaf, acc ->
        t = Core.to_tensor(leaf)
        {Core.wrap(Native.stop_gradient(Core.ref!(t))), acc}
      end)

    out
  end

  # ---- the call ----------------------------------------------------------

  defp call(fun, args, argnums, cotangent) do
    indices = List.wrap(argnums)

    {args, wrappers} =
      args
      |> Enum.with_index()
      |> Enum.map_reduce([], fn {arg, i}, acc ->
        if i in indices, do: wrap_arg(arg, acc), else: {arg, acc}
      end)

    wrappers = Enum.reverse(wrappers)
    value = apply(fun, args)
    out = output_tensor(value)
    ct = cotangent_for(out, cotangent)
    grads = Native.vjp([Core.ref!(out)], [Core.ref!(ct)], Enum.map(wrappers, &Core.ref!/1))
    grads = Enum.map(grads, &Core.wrap/1)

    {per_arg, []} =
      args
      |> Enum.with_index()
      |> Enum.filter(fn {_arg, i} -> i in indices end)
      |> Enum.map_reduce(grads, fn {arg, i}, grads ->
        {g, rest} = map_leaves(arg, grads, fn _leaf, [g | rest] -> {g, rest} end)
        {{i, g}, rest}
      end)

    by_index = Map.new(per_arg)

    grads =
      if is_list(argnums),
        do: argnums |> Enum.map(&Map.fetch!(by_index, &1)) |> List.to_tuple(),
        else: Map.fetch!(by_index, argnums)

    {value, grads}
  end

  # Each leaf gets a fresh identity node (integers become f32 first), so a
  # handle passed twice or also captured by the function is told apart.
  defp wrap_arg(arg, acc) do
    map_leaves(arg, acc, fn leaf, acc ->
      t = Core.to_tensor(leaf)

      t =
        case t.type do
          {kind, _} when kind in [:u, :s] -> Core.cast(t, {:f, 32})
          _ -> t
        end

      w = Core.wrap(Native.identity(Core.ref!(t)))
      {w, [w | acc]}
    end)
  end

  defp output_tensor(%Emily.Tensor{} = t), do: t

  defp output_tensor(other) do
    raise ArgumentError,
          "grad: the differentiated function must return a tensor, got: " <>
            inspect(other, limit: 5)
  end

  defp cotangent_for(%Emily.Tensor{shape: {}, type: type}, nil), do: Core.to_tensor(1, type)

  defp cotangent_for(%Emily.Tensor{shape: shape}, nil) do
    raise ArgumentError,
          "grad: the differentiated function must return a scalar tensor " <>
            "(or pass :cotangent), got shape #{inspect(shape)}"
  end

  defp cotangent_for(%Emily.Tensor{shape: shape, type: type}, ct) do
    ct = Core.to_tensor(ct, type)

    if ct.shape != shape do
      raise ArgumentError,
            "grad: the :cotangent has shape #{inspect(ct.shape)} but the output " <>
              "has shape #{inspect(shape)}"
    end

    ct
  end

  # Walks tensors and numbers in tuples, lists and maps (maps by sorted
  # key, so two walks over one container visit leaves in one order).
  defp map_leaves(%Emily.Tensor{} = t, acc, fun), do: fun.(t, acc)
  defp map_leaves(x, acc, fun) when is_number(x), do: fun.(x, acc)

  defp map_leaves(tuple, acc, fun) when is_tuple(tuple) do
    {list, acc} = map_leaves(Tuple.to_list(tuple), acc, fun)
    {List.to_tuple(list), acc}
  end

  defp map_leaves(list, acc, fun) when is_list(list),
    do: Enum.map_reduce(list, acc, &map_leaves(&1, &2, fun))

  defp map_leaves(%{} = map, acc, fun) when not is_struct(map) do
    {pairs, acc} =
      map
      |> Map.to_list()
      |> Enum.sort_by(fn {k, _} -> k end)
      |> Enum.map_reduce(acc, fn {k, v}, acc ->
        {v, acc} = map_leaves(v, acc, fun)
        {{k, v}, acc}
      end)

    {Map.new(pairs), acc}
  end

  defp map_leaves(other, _acc, _fun) do
    raise ArgumentError,
          "grad: expected tensors, numbers or tuples, lists and maps of them, " <>
            "got: #{inspect(other, limit: 5)}"
  end

  # A function of the given arity that passes its arguments as a list.
  defp with_arity(0, run), do: fn -> run.([]) end
  defp with_arity(1, run), do: fn a -> run.([a]) end
  defp with_arity(2, run), do: fn a, b -> run.([a, b]) end
  defp with_arity(3, run), do: fn a, b, c -> run.([a, b, c]) end
  defp with_arity(4, run), do: fn a, b, c, d -> run.([a, b, c, d]) end
  defp with_arity(5, run), do: fn a, b, c, d, e -> run.([a, b, c, d, e]) end
  defp with_arity(6, run), do: fn a, b, c, d, e, f -> run.([a, b, c, d, e, f]) end

  defp with_arity(n, _run),
    do: raise(ArgumentError, "grad: functions of arity #{n} are not supported (0..6)")
end

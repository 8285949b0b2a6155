defmodule Emily.Compiler.Lower do
  @moduledoc false
  # Lowers an Nx.Defn.Expr graph to a lazy engine graph by walking it as
  # Nx.Defn.Evaluator does, but calling Emily.Backend's callbacks on
  # tensors whose refs are engine placeholders: nothing is computed, the
  # callbacks only build engine nodes, so the graph recorded is exactly the
  # one eager Nx on Emily.Backend builds for the same ops.
  #
  # The walk returns the output values (Emily.Backend tensors), the hooks
  # met on the way: {callback_spec, value, guard}, where value is the
  # container of tensors the hook receives and guard is nil or a u8 scalar
  # tensor (when the hook is reached only through cond clauses: the
  # condition that one of them is taken), and the indices of the parameters
  # the expression reads. Emily.Compiler makes values and guards program
  # outputs and calls the hooks after each run; only the parameters read
  # are inputs (Nx gives arguments as thunks, and the Evaluator calls only
  # those of parameters it meets: a lazy container's unused fields are
  # never computed).
  #
  # Nodes are memoized by id across cond clauses and the code outside them
  # (values are pure, and every clause is computed anyway), so a hooked
  # node first reached inside a clause and then outside it is a memo hit
  # the second time. Each memo entry therefore records the hooks its
  # subtree holds, and a hit under a weaker guard widens theirs: a hook
  # fires when any path that reaches it is taken, once.
  #
  # Hooks that would call nothing (a named hook without a callback whose
  # name has no override in the jit's :hooks) are dropped: their values
  # are never computed for them, as Nx makes hook bodies pure.
  #
  # Hooks inside a while become taps of the loop (em_while_tapped): the
  # body program gives, after the next state, the run's hook channel id
  # (the `channel` placeholder, an input of every run) and the hooked
  # values, and the loop hands them to that channel after each iteration.
  # Each such loop gets a site number; the walk returns site => the specs
  # of its hooks, which Emily.Compiler calls as the taps arrive.
  #
  # What cannot be one engine program throws {:emily_fallback, reason}:
  # runtime_call (an Elixir function in the middle of the graph), hooks in
  # a loop's condition, and a loop with hooks inside a cond clause (every
  # clause is computed, so its hooks would fire when the clause is not
  # taken). Emily.Compiler then runs the expression with
  # Nx.Defn.Evaluator on Emily.Backend instead.

  alias Nx.Defn.{Composite, Expr, Tree}
  alias Nx.Tensor, as: T

  @creation_ops [:eye, :iota, :from_binary]
  @list_ops [:concatenate, :stack]

  # Binary ops a reduce function may be, with the reduction that folds a
  # whole axis with them. reduce(t, acc, fun) is fun(...fun(acc, t0)...,
  # tn): for these associative, commutative ops that is
  # fun(reduction(t), acc), up to float rounding order.
  @reducers %{
    add: :sum,
    multiply: :product,
    max: :reduce_max,
    min: :reduce_min,
    logical_and: :all,
    logical_or: :any
  }

  @doc """
  Walks `expr` (a container of Expr tensors) with `params` (a tuple of
  Emily.Backend tensors, by parameter index). `backend_opts` are the
  Emily.Backend options creation ops use; `program_options` (what
  `Emily.Native.program_new/4` takes: the fuse flag, or a map that also asks
  for CUDA graphs) are those of the programs made for while loops, so
  that a loop's condition and body replay as CUDA graphs when the
  jit's program would; `overrides`: the names of the jit's hook
  overrides; `channel`: the placeholder (an s64 scalar) standing for the
  run's hook channel id. Returns `{outputs, hooks, used, taps, schedule}`
  (`used`: the indices of the parameters read, ascending; `taps`: site =>
  the hook specs of that loop, see `hook_outputs/1`; `schedule`: the
  order in which the hooks (`:hook`, one per entry of `hooks`) and the
  loops with hooks at the top level (`{:loop, ref}`, ref one of the
  loop's outputs) are met, the order the Evaluator would call them in).
  """
  def lower(expr, params, backend_opts, program_options, overrides, channel) do
    ctx = %{
      params: params,
      top: true,
      guard: nil,
      opts: backend_opts,
      program_options: program_options,
      overrides: overrides,
      channel: channel
    }

    {result, acc} = composite_eval(expr, ctx, new_acc())

    schedule =
      Enum.map(Map.values(acc.hooks), fn {seq, _, _, _} -> {seq, :hook} end)
      |> Enum.concat(acc.loops)
      |> Enum.sort()
      |> Enum.map(&elem(&1, 1))

    {result, sorted_hooks(acc), acc.used |> Map.keys() |> Enum.sort(), acc.taps, schedule}
  end

  defp sorted_hooks(acc) do
    acc.hooks
    |> Map.values()
    |> Enum.sort()
    |> Enum.map(fn {_seq, spec, value, guard} -> {spec, value, guard} end)
  end

  @doc """
  The refs a program outputs for `hooks` (each hook's guard, when it has
  one, then its value's leaves) and the specs that rebuild and call them:
  `{callback_spec, template, leaves, guarded?}`.
  """
  def hook_outputs(hooks) do
    {outputs, specs} =
      Enum.map_reduce(hooks, [], fn {callback_spec, value, guard}, specs ->
        leaves = value |> List.wrap() |> Composite.flatten_list()
        refs = Enum.map(leaves, & &1.data.ref)
        guard_refs = if guard, do: [guard.data.ref], else: []
        template = Composite.traverse(value, &Nx.to_template/1)
        spec = {callback_spec, template, length(refs), guard != nil}
        {guard_refs ++ refs, [spec | specs]}
      end)

    {List.flatten(outputs), Enum.reverse(specs)}
  end

  # memo: id => {value, hooks its subtree reaches}; hooks: hook node id =>
  # {order, spec, value, guard}; reached: the hooks the subtree being
  # walked reaches so far; used: parameter indices read (top level); taps:
  # site => hook specs of the tapped loops met (nested ones included);
  # loops: {seq, {:loop, ref}} of the loops with hooks met; seq: counts the
  # hooks and loops met, in walk order.
  defp new_acc,
    do: %{memo: %{}, hooks: %{}, reached: %{}, used: %{}, taps: %{}, loops: [], seq: 0}

  defp fallback!(reason), do: throw({:emily_fallback, reason})

  # ---- walk ------------------------------------------------------------------

  defp composite_eval(composite, ctx, acc) do
    Composite.traverse(composite, acc, &eval(&1, ctx, &2))
  end

  defp eval(%T{data: %Expr{op: :constant, args: [number]}} = ans, ctx, acc) do
    {Emily.Backend.constant(ans, number, ctx.opts), acc}
  end

  defp eval(%T{data: %Expr{id: id, op: op, args: args}} = ans, ctx, acc) do
    case acc.memo do
      %{^id => {value, reached}} ->
        acc = if reached == %{}, do: acc, else: widen(acc, reached, ctx.guard)
        {value, %{acc | reached: Map.merge(acc.reached, reached)}}

      %{} ->
        outer = acc.reached
        {value, acc} = eval_apply(op, args, ans, ctx, %{acc | reached: %{}})
        reached = acc.reached

        {value,
         %{
           acc
           | memo: Map.put(acc.memo, id, {value, reached}),
             reached: Map.merge(outer, reached)
         }}
    end
  end

  # Numbers and other non-tensors inside containers pass through.
  defp eval(other, _ctx, acc), do: {other, acc}

  # The hooks of a memoized subtree, reached again under `guard`: each
  # fires when its guard or this one holds (nil: always).
  defp widen(acc, reached, guard) do
    hooks =
      Enum.reduce(Map.keys(reached), acc.hooks, fn id, hooks ->
        Map.update!(hooks, id, fn {order, spec, value, old} ->
          {order, spec, value, either(old, guard)}
        end)
      end)

    %{acc | hooks: hooks}
  end

  defp either(nil, _guard), do: nil
  defp either(_guard, nil), do: nil
  defp either(%T{data: %{ref: ref}} = guard, %T{data: %{ref: ref}}), do: guard
  defp either(a, b), do: Nx.logical_or(a, b)

  defp eval_apply(:tensor, [t], _ans, ctx, acc), do: {capture(t, ctx.opts), acc}

  defp eval_apply(:parameter, [i], _ans, %{top: true} = ctx, acc),
    do: {elem(ctx.params, i), %{acc | used: Map.put(acc.used, i, true)}}

  defp eval_apply(:parameter, [i], _ans, ctx, acc), do: {elem(ctx.params, i), acc}

  # stop_grad, custom_grad and the like: only Nx.Defn.Grad reads them.
  defp eval_apply(:metadata, [expr, _meta], _ans, ctx, acc), do: composite_eval(expr, ctx, acc)

  defp eval_apply(:elem, [tuple, i], _ans, ctx, acc) do
    {tuple, acc} = composite_eval(tuple, ctx, acc)
    {elem(tuple, i), acc}
  end

  defp eval_apply(:hook, [tensor_expr, spec, template, _ref], ans, ctx, acc) do
    {value, acc} = composite_eval(tensor_expr, ctx, acc)

    {hooked_spec, hooked_expr} =
      case spec do
        {:token_hook, hooked_expr, inner_spec} -> {inner_spec, hooked_expr}
        _ -> {spec, nil}
      end

    acc =
      if live_hook?(hooked_spec, ctx) do
        {hooked_value, acc} =
          if hooked_expr, do: composite_eval(hooked_expr, ctx, acc), else: {value, acc}

        id = ans.data.id
        hook = {acc.seq, hooked_spec, hooked_value, ctx.guard}

        %{
          acc
          | hooks: Map.put(acc.hooks, id, hook),
            reached: Map.put(acc.reached, id, true),
            seq: acc.seq + 1
        }
      else
        acc
      end

    result =
      case template do
        %T{} -> value
        _ -> value |> List.wrap() |> Composite.flatten_list() |> List.to_tuple()
      end

    {result, acc}
  end

  defp eval_apply(:runtime_call, _args, _ans, _ctx, _acc),
    do: fallback!("runtime_call runs an Elixir function on computed values")

  defp eval_apply(:fun, [params, expr, _mfa], _ans, ctx, acc) do
    # A backend that applies the function itself gets a closure that lowers
    # the body on the tensors it is given (as the Evaluator's does).
    run = fn args ->
      ctx = %{ctx | params: List.to_tuple(Enum.map(args, &Nx.to_tensor/1)), top: false}
      {result, _acc} = composite_eval(expr, ctx, new_acc())
      result
    end

    fun =
      case length(params) do
        1 -> fn a -> run.([a]) end
        2 -> fn a, b -> run.([a, b]) end
      end

    {fun, acc}
  end

  defp eval_apply(:cond, [clauses, last], _ans, ctx, acc), do: lower_cond(clauses, last, ctx, acc)

  defp eval_apply(:while, [initial, arg, pred, block], _ans, ctx, acc),
    do: lower_while(initial, arg, pred, block, ctx, acc)

  defp eval_apply(:block, [struct, in_args, expr, callback], ans, ctx, acc) do
    {in_args, acc} =
      Enum.map_reduce(in_args, acc, fn
        %T{} = t, acc -> eval(t, ctx, acc)
        other, acc -> {other, acc}
      end)

    out =
      case ans do
        %{type: {:tuple, _}} -> expr
        _ -> ans
      end

    {Emily.Backend.block(struct, out, in_args, callback), acc}
  end

  # A reduce whose function is a plain binary op becomes that op's
  # reduction (one engine op); any other function goes to the backend's
  # reduce/5 with a closure, which folds the reduced elements one by one.
  defp eval_apply(:reduce, [tensor, reduce_acc, opts, fun] = args, ans, ctx, acc) do
    case reducer(fun) do
      {op, reduction} ->
        {tensor, acc} = eval(tensor, ctx, acc)
        {reduce_acc, acc} = eval(reduce_acc, ctx, acc)
        reduce_opts = [axes: opts[:axes], keep_axes: opts[:keep_axes] || false]
        reduced = apply(Nx, reduction, [tensor, reduce_opts])
        {apply(Nx, op, [reduced, reduce_acc]) |> Nx.as_type(ans.type) |> rename(ans), acc}

      nil ->
        generic(:reduce, args, ans, ctx, acc)
    end
  end

  defp eval_apply(op, args, ans, ctx, acc), do: generic(op, args, ans, ctx, acc)

  defp generic(op, args, ans, ctx, acc) do
    ans = put_in(ans.data.args, args)
    {args, acc} = Tree.apply_args(ans, acc, &eval(&1, ctx, &2))

    result =
      cond do
        op in @creation_ops -> apply(Emily.Backend, op, [ans | args] ++ [ctx.opts])
        op in @list_ops -> apply(Emily.Backend, op, [ans | args])
        match?({:tuple, _}, ans.type) -> apply(Emily.Backend, op, args)
        true -> apply(Emily.Backend, op, [ans | args])
      end

    {result, acc}
  end

  defp rename(t, %T{names: names}), do: %{t | names: names}

  # ---- reduce with a function ------------------------------------------------

  defp reducer(%T{data: %Expr{op: :fun, args: [[a, b], body, _mfa]}}) do
    with %T{data: %Expr{op: op, args: [%T{} = x, %T{} = y]}} <- body,
         %{^op => reduction} <- @reducers,
         true <- params?(x, y, a, b) do
      {op, reduction}
    else
      _ -> nil
    end
  end

  defp reducer(_), do: nil

  defp params?(x, y, a, b) do
    ids = Enum.sort([x.data.id, y.data.id])
    ids == Enum.sort([a.data.id, b.data.id]) and x.data.id != y.data.id
  end

  # ---- captured tensors ------------------------------------------------------

  # A tensor the expression holds (a closure's weights, a constant too big
  # for a number): moved to Emily.Backend once and evaluated, so that the
  # program captures it by reference instead of recomputing it each run.
  defp capture(%T{data: %Emily.Backend{ref: ref}} = t, _opts) do
    Emily.eval(ref)
    t
  end

  defp capture(%T{} = t, opts) do
    t = Nx.backend_copy(t, {Emily.Backend, opts})
    Emily.eval(t.data.ref)
    t
  end

  # ---- cond ------------------------------------------------------------------

  # Every clause is lowered and each output is selected by the predicates,
  # first true clause first: the engine has no branching op, and a program
  # must be one graph. Predicates and clause bodies are pure (Nx makes them
  # so), so computing the clauses not taken changes the cost, not the
  # results. Hooks in a clause fire only when it is the one taken: their
  # guard is its condition.
  defp lower_cond(clauses, last, ctx, acc) do
    {conds, acc} =
      Enum.map_reduce(clauses, acc, fn {pred, _body}, acc ->
        {pred, acc} = eval(pred, ctx, acc)
        {Nx.not_equal(pred, 0), acc}
      end)

    # The condition of clause i: its predicate holds and no earlier one does.
    {taken, none_before} =
      Enum.map_reduce(conds, nil, fn cond, none_before ->
        taken = if none_before, do: Nx.logical_and(cond, none_before), else: cond

        none_before =
          if none_before,
            do: Nx.logical_and(none_before, Nx.logical_not(cond)),
            else: Nx.logical_not(cond)

        {taken, none_before}
      end)

    {bodies, acc} =
      Enum.zip(clauses, taken)
      |> Enum.map_reduce(acc, fn {{_pred, body}, taken}, acc ->
        composite_eval(body, %{ctx | guard: guard(ctx.guard, taken)}, acc)
      end)

    {last_value, acc} = composite_eval(last, %{ctx | guard: guard(ctx.guard, none_before)}, acc)

    result =
      Enum.zip(conds, bodies)
      |> Enum.reverse()
      |> Enum.reduce(last_value, fn {cond, body}, otherwise ->
        select_leaves(cond, body, otherwise)
      end)

    {result, acc}
  end

  defp guard(nil, cond), do: cond
  defp guard(outer, cond), do: Nx.logical_and(outer, cond)

  defp select_leaves(cond, %T{} = on_true, %T{} = on_false),
    do: select(cond, on_true, on_false)

  defp select_leaves(cond, on_true, on_false) when is_tuple(on_true) do
    Enum.zip_with(Tuple.to_list(on_true), Tuple.to_list(on_false), &select_leaves(cond, &1, &2))
    |> List.to_tuple()
  end

  defp select(cond, on_true, on_false) do
    Nx.select(cond, on_true, on_false) |> Nx.as_type(on_false.type) |> rename(on_false)
  end

  # A named hook without a callback calls something only when overridden.
  defp live_hook?({:named, name, nil}, ctx), do: MapSet.member?(ctx.overrides, name)
  defp live_hook?(_spec, _ctx), do: true

  # ---- while -----------------------------------------------------------------

  # The condition and the body become programs of their own (on placeholders
  # for the loop state, capturing what they close over), and the loop one
  # lazy engine op that replays them while the condition holds.
  defp lower_while(initial, _arg, pred, block, ctx, acc) do
    {initial, acc} = composite_eval(initial, ctx, acc)
    state = Composite.flatten_list([initial])
    refs = Enum.map(state, & &1.data.ref)
    device = device_index(ctx.opts)
    sub = %{ctx | guard: nil, top: false}

    {cond_program, _} =
      sub_program(state, device, ctx.program_options, fn params ->
        {pred, cond_acc} = eval(pred, %{sub | params: params}, new_acc())

        if cond_acc.hooks != %{} or cond_acc.taps != %{},
          do: fallback!("a hook in a while loop's condition")

        {[pred.data.ref], nil}
      end)

    {body_program, {tap_specs, inner_taps, tap_count}} =
      sub_program(state, device, ctx.program_options, fn params ->
        {next, body_acc} = composite_eval(block, %{sub | params: params}, new_acc())
        next_refs = next |> List.wrap() |> Composite.flatten_list() |> Enum.map(& &1.data.ref)
        {tap_refs, specs} = body_acc |> sorted_hooks() |> hook_outputs()
        taps = if specs == [], do: [], else: [ctx.channel.data.ref | tap_refs]
        {next_refs ++ taps, {specs, body_acc.taps, length(taps)}}
      end)

    if ctx.guard && (tap_specs != [] or inner_taps != %{}),
      do: fallback!("a while loop with hooks inside a cond clause")

    {out_refs, acc} =
      if tap_specs == [] do
        {Emily.Native.while_loop(cond_program, body_program, refs), acc}
      else
        site = :erlang.unique_integer([:positive])
        loop = Emily.Native.while_loop_tapped(cond_program, body_program, refs, tap_count, site)
        {loop, %{acc | taps: Map.put(acc.taps, site, tap_specs)}}
      end

    acc =
      if tap_specs == [] and inner_taps == %{} do
        acc
      else
        loop = {acc.seq, {:loop, hd(out_refs)}}

        %{
          acc
          | taps: Map.merge(acc.taps, inner_taps),
            loops: [loop | acc.loops],
            seq: acc.seq + 1
        }
      end

    {result, []} =
      Composite.traverse(initial, out_refs, fn t, [ref | refs] ->
        {%{t | data: %Emily.Backend{ref: ref}}, refs}
      end)

    {result, acc}
  end

  defp sub_program(state, device, program_options, fun) do
    placeholders =
      Enum.map(state, fn %T{type: type, shape: shape} ->
        Emily.Native.placeholder(
          Emily.Backend.Util.engine_type!(type, :while),
          Tuple.to_list(shape),
          device
        )
      end)

    params =
      Enum.zip_with(state, placeholders, fn t, ref -> %{t | data: %Emily.Backend{ref: ref}} end)

    # The loop's parameters are numbered from 0 in the order of the state's
    # leaves (Nx builds them so; the Evaluator relies on it too).
    {outputs, extra} = fun.(List.to_tuple(params))
    {Emily.Native.program_new(placeholders, outputs, program_options, true), extra}
  end

  @doc "The engine device number of Emily.Backend options."
  def device_index(opts) do
    case Keyword.get(opts, :device, :cpu) do
      :cpu -> 0
      device -> Emily.Device.check!("Emily.Compiler", device)
    end
  end
end

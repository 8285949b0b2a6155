defmodule Emily.Tensor.Compiler do
  @moduledoc """
  Trace a function into an engine program once, replay it in one call.

  `jit/2` turns a function of tensors into a function of the same arity.
  The first call with a given *signature* traces it: the tensor arguments
  are replaced by placeholders (tensors with a shape and type but no
  value), the function runs once and builds a lazy graph, and the engine
  records that graph as a program, simplified (common subexpressions and
  duplicate constants merged, dead nodes dropped). Later calls with the
  same signature replay the program on the new arguments in one NIF call
  that only builds the graph: the results are lazy tensors, evaluated when
  read, like the results of any `Emily.Tensor` function.

      iex> f = Emily.Tensor.Compiler.jit(fn x, y -> Emily.Tensor.add(Emily.Tensor.multiply(x, y), 1) end)
      iex> f.(Emily.Tensor.tensor([1.0, 2.0]), Emily.Tensor.tensor([3.0, 4.0])) |> Emily.Tensor.to_list()
      [4.0, 9.0]

  Replayed results are bit-identical to running the function eagerly
  (replay builds the nodes eager code builds and evaluates them the same
  way), unless `fuse: true` is given.

  ## Arguments and signatures

  Arguments may be tensors, or tuples, lists and maps nesting tensors. The
  signature of a call is the structure of its arguments and the shape and
  type of each tensor. Any other value in the arguments (numbers, atoms,
  options) is part of the signature *by value* and is baked into the
  program as a constant: a new number traces anew. Pass a tensor for a
  value that changes from call to call.

  Tensors the function captures from its environment (weights, say) are
  captured by reference when the program is built: a program keeps them
  alive, and replays use them without copying. A captured tensor that is
  still lazy (never evaluated) is part of the program instead, and every
  call computes it again: evaluate weights once (`Emily.eval(w.ref)`) before
  jitting functions that use them.

  The function returns a tensor or a container of tensors (the same kinds
  as arguments); non-tensor values in the result are returned as they were
  at trace time.

  ## Inside a traced function

  Tensors are placeholders while tracing: their values cannot be read.
  `Emily.Tensor.to_number/1`, `to_binary/1`, `to_list/1`, `inspect/1` or
  `Emily.eval/1` on a value that depends on an argument raise
  `ArgumentError` ("cannot read a traced tensor inside
  Emily.Tensor.Compiler.jit"). Use `Emily.Tensor.select/3` for data-dependent
  choices and `while/3` for data-dependent loops.

  ## Cache

  Each jitted function has its own cache of programs by signature,
  bounded by `:cache_size` (least recently used programs are dropped).
  `cache_info/1` reports hits, misses, evictions and the entries held;
  `clear_cache/1` drops them (the cache outlives the function value
  otherwise). The cache is an ETS table shared by all processes: a jitted
  function may be called from any process.

  ## Gradients

  `grad/2`, `value_and_grad/2` and `stop_gradient/1` (implemented in
  `Emily.Tensor.Compiler.Autodiff`) build the backward pass as more lazy nodes, so
  they compose with `jit/2`: `jit(value_and_grad(loss))` traces forward
  and backward passes once and replays both in one call. The other order,
  differentiating a jitted function, works for unfused programs (a replay
  builds ordinary nodes) and raises for `fuse: true` ones: fused and loop
  nodes have no gradient rules.

      iex> step = Emily.Tensor.Compiler.jit(Emily.Tensor.Compiler.value_and_grad(fn x -> Emily.Tensor.sum(Emily.Tensor.exp(x)) end))
      iex> {_value, g} = step.(Emily.Tensor.tensor([0.0, 0.0]))
      iex> Emily.Tensor.to_list(g)
      [1.0, 1.0]

  ## Telemetry

  `[:emily, :compiler, :trace]` is emitted for each trace, and each replay
  runs in a `[:emily, :program, :run]` span (see `Emily.Telemetry`).
  """

  alias Emily.Native
  alias Emily.Tensor.Core

  @table Emily.Tensor.Compiler.Cache
  @tracing {__MODULE__, :tracing}
  @max_arity 12

  # ---- gradients (Emily.Tensor.Compiler.Autodiff) -----------------------------------

  @doc "See `Emily.Tensor.Compiler.Autodiff.value_and_grad/2`."
  defdelegate value_and_grad(fun, opts \\ []), to: Emily.Tensor.Compiler.Autodiff
  @doc "See `Emily.Tensor.Compiler.Autodiff.grad/2`."
  defdelegate grad(fun, opts \\ []), to: Emily.Tensor.Compiler.Autodiff
  @doc "See `Emily.Tensor.Compiler.Autodiff.stop_gradient/1`."
  defdelegate stop_gradient(container), to: Emily.Tensor.Compiler.Autodiff

  # ---- jit -------------------------------------------------------------------

  @doc """
  A function of the same arity as `fun` that runs `fun` as a replayed
  program.

  Options:

    * `:fuse` (default `false`) — run the engine's fusion pass when
      building programs (results may then differ in the last bits).
    * `:cache_size` (default 64) — programs kept per jitted function.

  ## Examples

      iex> w = Emily.Tensor.tensor([[1.0, 2.0], [3.0, 4.0]])
      iex> layer = Emily.Tensor.Compiler.jit(fn x -> Emily.Tensor.dot(x, w) |> Emily.Tensor.tanh() end)
      iex> layer.(Emily.Tensor.tensor([[0.0, 0.0]])) |> Emily.Tensor.to_list()
      [[0.0, 0.0]]
      iex> Emily.Tensor.Compiler.cache_info(layer).misses
      1

  """
  @spec jit(function(), keyword()) :: function()
  def jit(fun, opts \\ []) when is_function(fun) do
    opts = Core.options!(opts, fuse: false, cache_size: 64)
    cache_size = opts[:cache_size]

    unless is_integer(cache_size) and cache_size > 0 do
      raise ArgumentError,
            "jit: :cache_size must be a positive integer, got: #{inspect(cache_size)}"
    end

    unless is_boolean(opts[:fuse]) do
      raise ArgumentError, "jit: :fuse must be a boolean, got: #{inspect(opts[:fuse])}"
    end

    {:arity, arity} = Function.info(fun, :arity)

    if arity > @max_arity do
      raise ArgumentError,
            "jit: functions of up to #{@max_arity} arguments are supported, got arity #{arity}"
    end

    id = make_ref()
    :ets.insert(@table, {{:stats, id}, 0, 0, 0})
    jitted(arity, {__MODULE__, %{id: id, fun: fun, fuse: opts[:fuse], cache_size: cache_size}})
  end

  for n <- 0..@max_arity do
    args = Macro.generate_arguments(n, __MODULE__)

    defp jitted(unquote(n), state) do
      fn unquote_splicing(args) -> call(state, unquote(args)) end
    end
  end

  @doc """
  Cache counters of a jitted function: `%{hits, misses, evictions,
  entries, size}` (`size` is the `:cache_size` bound).

  ## Examples

      iex> f = Emily.Tensor.Compiler.jit(&Emily.Tensor.exp/1)
      iex> _ = f.(Emily.Tensor.tensor([1.0]))
      iex> _ = f.(Emily.Tensor.tensor([2.0]))
      iex> _ = f.(Emily.Tensor.tensor([1.0, 2.0]))
      iex> Emily.Tensor.Compiler.cache_info(f)
      %{hits: 1, misses: 2, evictions: 0, entries: 2, size: 64}

  """
  @spec cache_info(function()) :: map()
  def cache_info(jitted) do
    %{id: id, cache_size: size} = state!(jitted)

    case :ets.lookup(@table, {:stats, id}) do
      [{_, evicted_hits, misses, evictions}] ->
        held = entries(id)
        hits = Enum.reduce(held, evicted_hits, fn {_key, _last_used, hits}, acc -> acc + hits end)
        %{hits: hits, misses: misses, evictions: evictions, entries: length(held), size: size}

      [] ->
        %{hits: 0, misses: 0, evictions: 0, entries: 0, size: size}
    end
  end

  @doc """
  Drops the programs and counters of a jitted function (it keeps working
  and traces again on its next call).

  ## Examples

      iex> f = Emily.Tensor.Compiler.jit(&Emily.Tensor.exp/1)
      iex> _ = f.(Emily.Tensor.tensor([1.0]))
      iex> Emily.Tensor.Compiler.clear_cache(f)
      :ok
      iex> Emily.Tensor.Compiler.cache_info(f).entries
      0

  """
  @spec clear_cache(function()) :: :ok
  def clear_cache(jitted) do
    %{id: id} = state!(jitted)
    Enum.each(entries(id), fn {key, _last_used, _hits} -> :ets.delete(@table, key) end)
    :ets.insert(@table, {{:stats, id}, 0, 0, 0})
    :ok
  end

  @doc """
  The engine's counters for the program a jitted function holds for
  `args` (traced now if needed): `%{nodes_before, nodes_after, cse_merged,
  constants, constants_merged, fused_kernels, inputs, outputs}`.

  ## Examples

      iex> f = Emily.Tensor.Compiler.jit(fn x -> Emily.Tensor.add(Emily.Tensor.exp(x), Emily.Tensor.exp(x)) end)
      iex> stats = Emily.Tensor.Compiler.program_stats(f, [Emily.Tensor.tensor([1.0])])
      iex> {stats.nodes_before, stats.nodes_after, stats.cse_merged}
      {3, 2, 1}

  """
  @spec program_stats(function(), list()) :: map()
  def program_stats(jitted, args) when is_list(args) do
    state = state!(jitted)
    {refs, sig} = flatten_args(args)
    {program, _out_sig} = lookup_or_trace(state, args, key_of(sig, refs))
    Native.program_stats(program)
  end

  defp state!(jitted) when is_function(jitted) do
    {:env, env} = Function.info(jitted, :env)

    Enum.find_value(env, fn
      {__MODULE__, %{id: _} = state} -> state
      _ -> nil
    end) ||
      raise ArgumentError,
            "expected a function made by Emily.Tensor.Compiler.jit/2, got: #{inspect(jitted)}"
  end

  defp entries(id) do
    :ets.select(@table, [{{{id, :"$1"}, :_, :"$2", :"$3"}, [], [{{{{id, :"$1"}}, :"$2", :"$3"}}]}])
  end

  # ---- calls -----------------------------------------------------------------

  defp call({__MODULE__, state}, args) do
    {refs, sig} = flatten_args(args)
    {program, out_sig} = lookup_or_trace(state, args, key_of(sig, refs))

    Emily.Telemetry.span([:emily, :program, :run], %{signature: sig}, fn ->
      outputs = Native.program_run(program, refs)
      {result, []} = build(out_sig, outputs)
      {result, %{signature: sig}}
    end)
  end

  # Entries are {{id, signature}, {program, output_signature}, last_used,
  # hits}; the counters row is {{:stats, id}, hits_of_evicted, misses,
  # evictions}. A hit is one lookup_element (it copies out only the value,
  # not the larger key) and one update_counter that sets last_used (the
  # {pos, incr, threshold, set} form: a positive value plus one is above
  # -1, so it is always set) and counts the hit. last_used values are
  # positive monotonic unique integers: ordered across processes.
  # A program is built for its inputs' devices: the signature alone keys
  # the common all-CPU case, {:on, sig, devices} any other.
  defp key_of(sig, refs) do
    case Native.array_devices(refs) do
      :cpu -> sig
      devices -> {:on, sig, devices}
    end
  end

  defp lookup_or_trace(%{id: id} = state, args, key_sig) do
    key = {id, key_sig}

    case lookup(key) do
      {_program, _out_sig} = found ->
        touch(key)
        found

      nil ->
        :ets.update_counter(@table, {:stats, id}, {3, 1})
        found = trace(state, args, key_sig)
        entry = {key, found, :erlang.unique_integer([:monotonic, :positive]), 0}

        # Another process may have traced the same signature meanwhile: its
        # entry stays, with the hits counted on it (an insert would reset
        # them); this call's program is just as valid.
        if :ets.insert_new(@table, entry), do: evict(state)
        found
    end
  end

  # Another process may have evicted the entry since the lookup: the
  # program found is still valid (refcounted), only the counters miss it.
  defp touch(key) do
    now = :erlang.unique_integer([:monotonic, :positive])
    :ets.update_counter(@table, key, [{3, 1, -1, now}, {4, 1}])
  rescue
    ArgumentError -> :evicted
  end

  defp lookup(key) do
    :ets.lookup_element(@table, key, 2)
  rescue
    ArgumentError -> nil
  end

  defp evict(%{id: id, cache_size: size}) do
    held = entries(id)

    if length(held) > size do
      {key, _last_used, hits} = Enum.min_by(held, &elem(&1, 1))
      :ets.delete(@table, key)
      :ets.update_counter(@table, {:stats, id}, [{2, hits}, {4, 1}])
    end
  end

  defp trace(%{fun: fun, fuse: fuse}, args, key_sig) do
    start = System.monotonic_time()
    {sig, devices} = split_key(key_sig)
    placeholders = placeholders(sig, devices)
    {traced_args, []} = build(sig, placeholders)
    result = on_device_of(devices, fn -> tracing(fn -> apply(fun, traced_args) end) end)
    {out_refs, out_sig} = flatten(result)
    program = Native.program_new(placeholders, out_refs, fuse, false)
    stats = Native.program_stats(program)

    Emily.Telemetry.execute(
      [:emily, :compiler, :trace],
      %{duration: System.monotonic_time() - start},
      %{
        nodes_before: stats.nodes_before,
        nodes_after: stats.nodes_after,
        fused_kernels: stats.fused_kernels,
        constants: stats.constants,
        signature: sig,
        arity: length(args)
      }
    )

    {program, out_sig}
  end

  # Runs fun with the tracing flag set (while/3 reads it), restoring it.
  defp tracing(fun) do
    previous = Process.get(@tracing, 0)
    Process.put(@tracing, previous + 1)

    try do
      fun.()
    after
      Process.put(@tracing, previous)
    end
  end

  @doc false
  def tracing?, do: Process.get(@tracing, 0) > 0

  # ---- containers ------------------------------------------------------------

  # A term's signature and its tensors' refs, in a fixed order:
  # {:t, shape, type} for a tensor; {:tuple, sigs}, {:list, sigs},
  # {:map, [{key, sig}]} for containers; {:c, term} for anything else.
  defp flatten_args(args) do
    {sigs, acc} = flatten_list(args, [])
    {Enum.reverse(acc), {:list, sigs}}
  end

  defp flatten(term) do
    {sig, acc} = flatten(term, [])
    {Enum.reverse(acc), sig}
  end

  defp flatten(%Emily.Tensor{ref: ref, shape: shape, type: type}, acc),
    do: {{:t, shape, type}, [ref | acc]}

  defp flatten(tuple, acc) when is_tuple(tuple) do
    {sigs, acc} = flatten_list(Tuple.to_list(tuple), acc)
    {{:tuple, sigs}, acc}
  end

  defp flatten(list, acc) when is_list(list) do
    if proper_list?(list) do
      {sigs, acc} = flatten_list(list, acc)
      {{:list, sigs}, acc}
    else
      {{:c, list}, acc}
    end
  end

  defp flatten(map, acc) when is_map(map) and not is_struct(map) do
    {pairs, acc} =
      map
      |> Enum.sort()
      |> Enum.map_reduce(acc, fn {key, value}, acc ->
        {sig, acc} = flatten(value, acc)
        {{key, sig}, acc}
      end)

    {{:map, pairs}, acc}
  end

  defp flatten(other, acc), do: {{:c, other}, acc}

  defp flatten_list([], acc), do: {[], acc}

  defp flatten_list([head | tail], acc) do
    {sig, acc} = flatten(head, acc)
    {sigs, acc} = flatten_list(tail, acc)
    {[sig | sigs], acc}
  end

  defp proper_list?([]), do: true
  defp proper_list?([_ | tail]), do: proper_list?(tail)
  defp proper_list?(_), do: false

  # The term of a signature with its tensors taken from refs, in order.
  defp build({:t, shape, type}, [ref | refs]),
    do: {%Emily.Tensor{ref: ref, shape: shape, type: type}, refs}

  defp build({:tuple, sigs}, refs) do
    {items, refs} = build_list(sigs, refs)
    {List.to_tuple(items), refs}
  end

  defp build({:list, sigs}, refs), do: build_list(sigs, refs)

  defp build({:map, pairs}, refs) do
    {items, refs} =
      Enum.map_reduce(pairs, refs, fn {key, sig}, refs ->
        {value, refs} = build(sig, refs)
        {{key, value}, refs}
      end)

    {Map.new(items), refs}
  end

  defp build({:c, term}, refs), do: {term, refs}

  defp build_list([], refs), do: {[], refs}

  defp build_list([sig | sigs], refs) do
    {item, refs} = build(sig, refs)
    {items, refs} = build_list(sigs, refs)
    {[item | items], refs}
  end

  defp split_key({:on, sig, devices}), do: {sig, devices}
  defp split_key(sig), do: {sig, :cpu}

  # Tensors the traced function creates (constants, iota, ...) go where its
  # inputs are when they all live on GPU 0: the default backend while tracing.
  defp on_device_of(devices, fun) when is_list(devices) do
    if Enum.uniq(devices) == [1],
      do: Emily.Tensor.with_default_backend({Emily.Tensor, device: :gpu}, fun),
      else: fun.()
  end

  defp on_device_of(:cpu, fun), do: fun.()

  # One placeholder per tensor of a signature, in order, on the device of
  # the corresponding input (devices: a list of engine device numbers, or
  # :cpu for all).
  defp placeholders(sig, devices) do
    types = Enum.reverse(collect_placeholders(sig, []))
    devices = if devices == :cpu, do: List.duplicate(0, length(types)), else: devices

    Enum.zip_with(types, devices, fn {type, shape}, device ->
      Native.placeholder(type, shape, device)
    end)
  end

  defp collect_placeholders({:t, shape, type}, acc),
    do: [{type, Tuple.to_list(shape)} | acc]

  defp collect_placeholders({kind, sigs}, acc) when kind in [:tuple, :list],
    do: Enum.reduce(sigs, acc, &collect_placeholders/2)

  defp collect_placeholders({:map, pairs}, acc),
    do: Enum.reduce(pairs, acc, fn {_key, sig}, acc -> collect_placeholders(sig, acc) end)

  defp collect_placeholders({:c, _}, acc), do: acc

  # ---- while -----------------------------------------------------------------

  @doc """
  A loop: while `cond_fun.(state)` is true (a nonzero scalar tensor, or
  `true`), `state = body_fun.(state)`; returns the final state.

  `initial` is a tensor or a container of tensors (numbers in it become
  tensors); the body must return the same structure with the same shapes
  and types.

  Called eagerly, the loop runs in Elixir and reads the condition each
  iteration. Inside a function being traced by `jit/2`, the condition and
  the body are traced once each into programs and the loop becomes one
  lazy engine op that runs them when evaluated: the number of iterations
  may depend on the (traced) data. The results are the same either way.

  ## Examples

      iex> {i, x} = Emily.Tensor.Compiler.while({0, Emily.Tensor.tensor([1.0, 2.0])},
      ...>   fn {i, _x} -> Emily.Tensor.less(i, 3) end,
      ...>   fn {i, x} -> {Emily.Tensor.add(i, 1), Emily.Tensor.multiply(x, 2)} end)
      iex> {Emily.Tensor.to_number(i), Emily.Tensor.to_list(x)}
      {3, [8.0, 16.0]}

  """
  @spec while(term(), (term() -> term()), (term() -> term())) :: term()
  def while(initial, cond_fun, body_fun)
      when is_function(cond_fun, 1) and is_function(body_fun, 1) do
    initial = tensorize(initial)

    if tracing?() do
      traced_while(initial, cond_fun, body_fun)
    else
      eager_while(initial, cond_fun, body_fun)
    end
  end

  defp eager_while(state, cond_fun, body_fun) do
    if truthy?(cond_fun.(state)) do
      eager_while(check_state!(state, tensorize(body_fun.(state))), cond_fun, body_fun)
    else
      state
    end
  end

  defp truthy?(%Emily.Tensor{} = t) do
    if Emily.Tensor.size(t) != 1 do
      raise ArgumentError,
            "while: the condition must be a scalar, got a tensor of shape #{inspect(t.shape)}"
    end

    Emily.Tensor.to_number(Emily.Tensor.reshape(t, {})) not in [0, 0.0]
  end

  defp truthy?(b) when is_boolean(b), do: b
  defp truthy?(n) when is_number(n), do: n != 0

  defp truthy?(other),
    do:
      raise(
        ArgumentError,
        "while: the condition must return a scalar tensor or a boolean, got: #{inspect(other)}"
      )

  defp traced_while(initial, cond_fun, body_fun) do
    {refs, sig} = flatten(initial)

    if refs == [] do
      raise ArgumentError,
            "while: the state must hold at least one tensor, got: #{inspect(initial)}"
    end

    # The loop runs where its state lives: its programs are traced there.
    {refs, devices} = scalars_follow(refs)
    cond_program = trace_part(sig, devices, fn state -> [cond_ref(cond_fun.(state))] end)

    body_program =
      trace_part(sig, devices, fn state ->
        {out_refs, _} = flatten(check_state!(initial, tensorize(body_fun.(state))))
        out_refs
      end)

    {result, []} = build(sig, Native.while_loop(cond_program, body_program, refs))
    result
  end

  # Rank-0 CPU entries of a state that also lives on a GPU move there (the
  # engine's rule for numbers beside GPU operands), so that the whole loop
  # runs on that GPU.
  defp scalars_follow(refs) do
    devices = Enum.map(refs, &Native.array_device/1)

    case Enum.find(devices, &(&1 != 0)) do
      nil ->
        {refs, devices}

      gpu ->
        refs =
          Enum.zip_with(refs, devices, fn ref, device ->
            if device == 0 and Native.shape(ref) == [],
              do: Native.to_device(ref, gpu),
              else: ref
          end)

        {refs, Enum.map(refs, &Native.array_device/1)}
    end
  end

  defp trace_part(sig, devices, fun) do
    placeholders = placeholders(sig, devices)
    {state, []} = build(sig, placeholders)
    outputs = on_device_of(devices, fn -> tracing(fn -> fun.(state) end) end)
    Native.program_new(placeholders, outputs, false, true)
  end

  defp cond_ref(%Emily.Tensor{} = t) do
    if Emily.Tensor.size(t) != 1 do
      raise ArgumentError,
            "while: the condition must be a scalar, got a tensor of shape #{inspect(t.shape)}"
    end

    t.ref
  end

  defp cond_ref(b) when is_boolean(b), do: Core.to_tensor(if(b, do: 1, else: 0), {:u, 8}).ref
  defp cond_ref(n) when is_number(n), do: Core.to_tensor(n).ref

  defp cond_ref(other),
    do:
      raise(
        ArgumentError,
        "while: the condition must return a scalar tensor or a boolean, got: #{inspect(other)}"
      )

  # Numbers in a loop state become tensors (so that both modes agree).
  defp tensorize(%Emily.Tensor{} = t), do: t
  defp tensorize(n) when is_number(n), do: Core.to_tensor(n)

  defp tensorize(tuple) when is_tuple(tuple),
    do: tuple |> Tuple.to_list() |> Enum.map(&tensorize/1) |> List.to_tuple()

  defp tensorize(list) when is_list(list), do: Enum.map(list, &tensorize/1)

  defp tensorize(map) when is_map(map) and not is_struct(map),
    do: Map.new(map, fn {k, v} -> {k, tensorize(v)} end)

  defp tensorize(other), do: other

  defp check_state!(state, next) do
    {_, want} = flatten(state)
    {_, got} = flatten(next)

    if want != got do
      raise ArgumentError,
            "while: the body must return the state's structure, shapes and types; " <>
              "expected #{describe(want)}, got #{describe(got)}"
    end

    next
  end

  defp describe(sig), do: inspect(sig, limit: 20)
end

defmodule Emily.Compiler do
  @moduledoc """
  An `Nx.Defn.Compiler` on libemily: a `defn` (or any function given to
  `Nx.Defn.jit/2`) becomes one engine program, simplified and fused once,
  then replayed on each call in one NIF call.

      Nx.Defn.jit(fn a, b -> a * b + 1 end, compiler: Emily.Compiler)
      Nx.Defn.default_options(compiler: Emily.Compiler)

  Results are `Emily.Backend` tensors, lazy like every Emily tensor: the
  replay only builds the graph, and it is computed when a result is read
  (or `Emily.eval/1`'d).

  ## Options

  Given to `Nx.Defn.jit/2`, `Nx.Defn.compile/3`, `Nx.Serving` or
  `Nx.Defn.default_options/1` beside `compiler: Emily.Compiler`:

    * `:fuse` (default `true`) - run the engine's fusion pass on the
      program: elementwise chains are fused with the reductions and
      normalisations they feed. Results may then differ from eager
      `Emily.Backend` in the last bits (float rounding order); with
      `fuse: false` they are bit-identical to it.
    * `:device` - `:cpu`, `:gpu` or `{:gpu, index}`: where the program
      runs. Arguments living elsewhere are copied there; results live there
      (`__to_backend__/1` says so to Nx). The default is the device of the
      process's default backend when that is `Emily.Backend` (so
      `Nx.global_default_backend({Emily.Backend, device: :gpu})` is all a
      GPU program needs), else `:cpu`.
    * `:cuda_graph` (default `false`) - on a GPU, replay the program as one
      CUDA graph: the first call runs it the ordinary way and records its
      kernels once into a graph; later calls launch the graph once (a step
      bound by kernel launches gets much faster). Arguments the caller
      keeps passing unchanged (parameters) are read in place; others are
      copied into the graph's buffers (a call that changes an argument read
      in place records the graph once more, without binding it). Inside a
      `while` loop, state that an iteration updates in place (a KV cache
      given to `Nx.put_slice`) stays in the graph's buffers and is not
      copied per iteration. A `while`
      loop's condition and body are programs of their own, each replayed
      as a CUDA graph per iteration (the loop itself reads its condition
      on the host, so it cannot be one graph). A program that cannot be
      captured (an op that reads a value on the host, a node on the CPU,
      a loop) runs the ordinary way; the reason is in
      `Emily.Native.program_stats/1` (`cuda_graph: :fallback`,
      `cuda_graph_reason`). Results are those of the ordinary replay. No
      effect on the CPU.
    * `:hooks` - Nx's map of hook overrides (see `Nx.Defn.Kernel.hook/3`).
    * `:max_concurrency` (default 1) - partitions an `Nx.Serving` starts
      (`__partitions_options__/1`).

  Other options are ignored, as `Nx.Defn.Evaluator` does.

  ## How an expression is lowered

  `fun.(vars)` gives the `Nx.Defn.Expr` graph. It is walked as
  `Nx.Defn.Evaluator` walks it, but every op calls `Emily.Backend` on
  tensors whose refs are engine placeholders: the callbacks only build
  lazy engine nodes, so the graph recorded is exactly the one eager Nx on
  `Emily.Backend` builds. `Emily.Native.program_new/4` then records it
  between the placeholders and the outputs as a program (common
  subexpressions merged, duplicate constants merged, dead nodes dropped,
  fused), and each call replays it with `Emily.Native.program_run/2`.
  Node by node:

    * `:parameter` - the placeholder of that argument (vectorized
      arguments are devectorized, as the Evaluator does). Only parameters
      the expression reads are program inputs: Nx passes arguments as
      functions, and the others are never called (a lazy container's
      unused fields are not computed, as with the Evaluator).
    * `:constant` - `Emily.Backend.constant/3` (a scalar or a filled
      tensor, deduplicated by the engine).
    * `:tensor` - a tensor the expression holds (closure weights): copied to
      `Emily.Backend` once and evaluated at trace time, so the program
      captures it by reference.
    * `:metadata` (`stop_grad`, `custom_grad`, ...) - its expression:
      metadata only matters to `Nx.Defn.Grad`, which already ran.
    * `:elem` - the element of the lowered tuple.
    * every `Nx.Backend` op - the `Emily.Backend` callback of that name.
      `:block` (`Nx.block/4`: linear algebra, cumulative ops, `take`, ...)
      calls `Emily.Backend.block/4`, which runs an engine kernel or the
      default implementation, itself lowered the same way.
    * `:reduce` with a function - when the function is a plain
      `+`/`*`/`max`/`min`/`and`/`or` of its two arguments, the matching
      reduction (one engine op) combined with the accumulator; otherwise
      `Emily.Backend.reduce/5` with the function lowered on its arguments
      (`:fun` nodes become such closures).
    * `:while` - the condition and the body are lowered into programs of
      their own (on placeholders for the loop state) and the loop becomes
      one lazy engine op (`Emily.Native.while_loop/3`) that replays them
      while the condition holds: the iteration count may depend on data.
    * `:cond` - the engine has no branch op, and a program is one graph: the
      predicates and every clause are lowered, and each output is a
      `select` of the clauses' values, first true predicate first. This is
      sound because Nx makes clause bodies pure (no effect but hooks, which
      are guarded, see below): computing a clause that is not taken costs
      time but changes no result. The costs: clauses are all computed, and
      a `while` inside a clause not taken still runs (one that would never
      terminate when its clause is not taken hangs).
    * `:hook` (`hook/2,3`, `print_value/2`, tokens) - the hooked value
      becomes an extra output of the program; after each run the callback
      (or the override from `:hooks`) is called with it, in the order the
      Evaluator calls them. A hook inside a `cond` clause fires only when
      that clause is taken (its clause's condition is an output too, read
      before calling); a hooked value that clauses and the code outside
      them share fires whenever any of them reaches it, once. A named hook
      with no callback and no override calls nothing and is dropped
      (which hooks are overridden is part of the cache key).
    * `:hook` inside `while` - the loop's body program gives the hooked
      values as extra outputs, and the engine hands them over after each
      iteration, without stopping the loop: the run opens a channel to the
      calling process, and the callbacks are called there as the values
      arrive, while the stream's worker computes the next iterations. A
      call of such a function evaluates it to the end before returning,
      calling every hook in the Evaluator's order (hooks met before a loop
      first, then the loop's, iteration by iteration, then the rest). This
      is how `Bumblebee.Text.generation`'s streaming (`stream: true`) runs
      its whole decode loop as one program. If a callback raises, the loop
      still runs to its end (an engine loop cannot be interrupted), then
      the error is raised.

  Three things cannot be one program: `:runtime_call` (an Elixir function
  on intermediate values), hooks in a `while` condition, and a `while`
  with hooks inside a `cond` clause (every clause is computed, so its
  hooks would fire when the clause is not taken). For those expressions
  the compiler runs `Nx.Defn.Evaluator` with `Emily.Backend` as the
  backend instead: the same results, op by op, without the program's
  replay (and re-traced on each call). The `[:emily, :defn, :compile]`
  event says which way a function went (`mode: :program | :evaluator`).

  ## Cache

  Programs are cached in an ETS table shared by all processes, by the
  function (Nx's key), the shapes, types, names and vectorized axes of the
  arguments with their container structure, and the `:fuse`, `:cuda_graph`
  and `:device` options. A hit costs one ETS lookup: the expression is not rebuilt nor
  walked. The table keeps the #{512} most recently used programs.
  `cache_info/0` gives the counters; `clear_cache/0` empties it. Each
  compilation (a miss) emits `[:emily, :defn, :compile]`.

  ## Not supported

    * `Nx.Defn.Compiler.__shard_jit__/6` (meshes): one device per program.
    * Types the engine lacks (`u2`, `u4`, `s2`, `s4`, `f8`): as in
      `Emily.Backend`, they raise `ArgumentError`.
  """

  @behaviour Nx.Defn.Compiler

  alias Emily.Compiler.Lower
  alias Emily.Native
  alias Nx.Defn.Composite
  alias Nx.Tensor, as: T

  @table Emily.Compiler.Cache
  @max_entries 512

  # ---- Nx.Defn.Compiler ------------------------------------------------------

  @impl true
  def __jit__(key, vars, fun, args_list, opts) do
    entry = fetch(key, vars, fun, opts)
    Enum.map(args_list, &run(entry, &1, key, vars, fun, opts))
  end

  @impl true
  def __compile__(key, vars, fun, opts) do
    entry = fetch(key, vars, fun, opts)
    fn args_list -> Enum.map(args_list, &run(entry, &1, key, vars, fun, opts)) end
  end

  @impl true
  def __partitions_options__(opts) do
    List.duplicate(opts, Keyword.get(opts, :max_concurrency, 1))
  end

  @impl true
  def __to_backend__(opts) do
    {Emily.Backend, device: device(opts)}
  end

  # ---- cache -----------------------------------------------------------------

  @doc """
  The program cache's counters: `%{hits, misses, evictions, entries,
  size}` (`size` is the bound on entries).

      iex> %{size: size} = Emily.Compiler.cache_info()
      iex> size
      512
  """
  @spec cache_info() :: %{atom() => non_neg_integer()}
  def cache_info do
    [{:stats, evicted_hits, misses, evictions}] = :ets.lookup(@table, :stats)
    held = entries()
    hits = Enum.reduce(held, evicted_hits, fn {_key, _used, hits}, acc -> acc + hits end)
    %{hits: hits, misses: misses, evictions: evictions, entries: length(held), size: @max_entries}
  end

  @doc "Drops every cached program and resets the counters."
  @spec clear_cache() :: :ok
  def clear_cache do
    :ets.delete_all_objects(@table)
    :ets.insert(@table, {:stats, 0, 0, 0})
    :ok
  end

  defp entries do
    :ets.select(@table, [
      {{:"$1", :_, :"$2", :"$3"}, [{:"=/=", :"$1", :stats}], [{{:"$1", :"$2", :"$3"}}]}
    ])
  end

  defp device(opts) do
    Keyword.get_lazy(opts, :device, fn ->
      case Nx.default_backend() do
        {Emily.Backend, backend_opts} -> Keyword.get(backend_opts, :device, :cpu)
        _ -> :cpu
      end
    end)
  end

  # Entries: {cache_key, entry, last_used, hits}. A hit is one lookup and one
  # update_counter (last_used set, hits counted); last_used values are
  # monotonic unique integers, ordered across processes.
  defp fetch(key, vars, fun, opts) do
    fuse = Keyword.get(opts, :fuse, true)
    options = program_options(fuse, Keyword.get(opts, :cuda_graph, false))
    device = device(opts)
    # Named hooks without a callback run only when overridden: which are
    # is part of the program (the others are dropped), not their functions.
    overrides = opts |> Keyword.get(:hooks, %{}) |> Map.keys() |> MapSet.new()
    build = {options, device, overrides}

    if small?(key) do
      fetch_cached({key, build, vars_key(vars)}, vars, fun, build)
    else
      compile(vars, fun, build)
    end
  end

  # What Native.program_new/4 takes: the fuse boolean, or a map when a CUDA
  # graph is asked for.
  defp program_options(fuse, true), do: %{fuse: fuse, cuda_graph: true}
  defp program_options(fuse, _cuda_graph), do: fuse

  # Nx's key is the function: a closure over a large term (an expression
  # graph, as Nx.Defn.Graph's stages hold) is not cached, because ETS
  # copies keys without their sharing, and a graph with shared nodes
  # unfolds into a tree exponentially larger. A walk with a budget tells
  # small keys from others in bounded time.
  @key_budget 2_000

  defp small?(key), do: small(key, @key_budget) >= 0

  defp small(_term, budget) when budget < 0, do: budget

  defp small(term, budget) when is_function(term) do
    case Function.info(term, :env) do
      {:env, env} -> small(env, budget - 1)
      _ -> budget - 1
    end
  end

  defp small([head | tail], budget), do: small(tail, small(head, budget - 1))

  defp small(tuple, budget) when is_tuple(tuple),
    do: small(Tuple.to_list(tuple), budget - 1)

  defp small(map, budget) when is_map(map), do: small(Map.to_list(map), budget - 1)

  defp small(binary, budget) when is_binary(binary), do: budget - div(byte_size(binary), 64) - 1
  defp small(_other, budget), do: budget - 1

  defp fetch_cached(cache_key, vars, fun, build) do
    case lookup(cache_key) do
      nil ->
        :ets.update_counter(@table, :stats, {3, 1})
        entry = compile(vars, fun, build)

        row = {cache_key, entry, :erlang.unique_integer([:monotonic, :positive]), 0}
        if :ets.insert_new(@table, row), do: evict()
        entry

      entry ->
        touch(cache_key)
        entry
    end
  end

  defp lookup(cache_key) do
    :ets.lookup_element(@table, cache_key, 2)
  rescue
    ArgumentError -> nil
  end

  defp touch(cache_key) do
    now = :erlang.unique_integer([:monotonic, :positive])
    :ets.update_counter(@table, cache_key, [{3, 1, -1, now}, {4, 1}])
  rescue
    # Evicted by another process meanwhile: the entry found is still valid.
    ArgumentError -> :ok
  end

  defp evict do
    held = entries()

    if length(held) > @max_entries do
      {cache_key, _used, hits} = Enum.min_by(held, &elem(&1, 1))
      :ets.delete(@table, cache_key)
      :ets.update_counter(@table, :stats, [{2, hits}, {4, 1}])
    end
  end

  # The arguments' templates: what the expression depends on besides the
  # function. Tensors and tuples (the common case) are walked directly;
  # maps and other containers through Nx.Container.
  defp vars_key(vars), do: Enum.map(vars, &template_key/1)

  defp template_key(%T{type: type, shape: shape, names: names, vectorized_axes: axes}),
    do: {type, shape, names, axes}

  defp template_key(tuple) when is_tuple(tuple),
    do: tuple |> Tuple.to_list() |> Enum.map(&template_key/1) |> List.to_tuple()

  defp template_key(other), do: Composite.traverse(other, &template_key/1)

  # ---- compile ---------------------------------------------------------------

  defp compile(vars, fun, {options, device, overrides}) do
    start = System.monotonic_time()
    backend_opts = [device: device]
    device_index = Lower.device_index(backend_opts)

    # The output container with templates in place of tensors (to_template
    # keeps the vectorized axes results are given back with); the walk sees
    # the devectorized expressions, as the Evaluator's does.
    result = fun.(vars)
    out_template = Composite.traverse(result, &Nx.to_template/1)
    expr = Composite.traverse(result, &Nx.devectorize/1)

    params =
      vars
      |> Composite.flatten_list()
      |> Enum.map(fn %T{data: %Nx.Defn.Expr{op: :parameter, args: [i]}} = p -> {i, p} end)
      |> Enum.sort()
      |> Enum.map(fn {_i, p} -> Nx.devectorize(p) end)

    placeholders =
      Enum.map(params, fn %T{type: type, shape: shape} ->
        Native.placeholder(
          Emily.Backend.Util.engine_type!(type, :parameter),
          Tuple.to_list(shape),
          device_index
        )
      end)

    traced =
      Enum.zip_with(params, placeholders, fn p, ref ->
        %{p | data: %Emily.Backend{ref: ref}}
      end)

    # The run's hook channel id, read by loops with hooks (see run/6).
    channel = %T{
      type: {:s, 64},
      shape: {},
      names: [],
      data: %Emily.Backend{ref: Native.placeholder({:s, 64}, [], device_index)}
    }

    entry =
      try do
        {result, hooks, used, taps, schedule} =
          Lower.lower(expr, List.to_tuple(traced), backend_opts, options, overrides, channel)

        {hook_refs, hook_specs} = Lower.hook_outputs(hooks)
        user_refs = result |> List.wrap() |> Composite.flatten_list() |> Enum.map(& &1.data.ref)
        # Outputs: the function's, the hooks' values, then one output of
        # each loop with hooks (see run_tapped/4). Inputs: the parameters
        # the expression reads (the arguments of the others are never asked
        # for, see run/6), then the channel when a loop has hooks.
        loop_refs = for {:loop, ref} <- schedule, do: ref
        inputs = Enum.map(used, &Enum.at(placeholders, &1))
        inputs = if taps == %{}, do: inputs, else: inputs ++ [channel.data.ref]
        outputs = user_refs ++ hook_refs ++ loop_refs
        program = Native.program_new(inputs, outputs, options, false)

        {:program,
         %{
           program: program,
           out_template: out_template,
           n_out: length(user_refs),
           hook_specs: hook_specs,
           n_hook_refs: length(hook_refs),
           device: device_index,
           used: used,
           taps: taps,
           schedule:
             Enum.map(schedule, fn
               {:loop, _} -> :loop
               :hook -> :hook
             end)
         }}
      catch
        {:emily_fallback, reason} -> {:evaluator, reason, device}
      end

    emit_compile(entry, start, length(params))
    entry
  end

  defp emit_compile(entry, start, arity) do
    {measurements, metadata} =
      case entry do
        {:program, %{program: program, hook_specs: hooks, taps: taps}} ->
          stats = Native.program_stats(program)

          {%{duration: System.monotonic_time() - start},
           %{
             mode: :program,
             nodes_before: stats.nodes_before,
             nodes_after: stats.nodes_after,
             fused_kernels: stats.fused_kernels,
             hooks: length(hooks) + (taps |> Map.values() |> Enum.map(&length/1) |> Enum.sum()),
             arity: arity
           }}

        {:evaluator, reason, _device} ->
          {%{duration: System.monotonic_time() - start},
           %{mode: :evaluator, reason: reason, arity: arity}}
      end

    Emily.Telemetry.execute([:emily, :defn, :compile], measurements, metadata)
  end

  # ---- run -------------------------------------------------------------------

  defp run({:program, entry}, args, _key, _vars, _fun, opts) do
    %{program: program, n_out: n_out, hook_specs: hook_specs, device: device} = entry
    refs = input_refs(args, entry.used, device)
    overrides = Keyword.get(opts, :hooks, %{})

    results =
      if entry.taps == %{} do
        outputs = Native.program_run(program, refs)
        {results, rest} = Enum.split(outputs, n_out)
        if hook_specs != [], do: run_hooks(hook_specs, rest, overrides)
        results
      else
        run_tapped(entry, refs, overrides)
      end

    {result, []} = fill(entry.out_template, results)

    # Inside another function's trace (a jit forced with `on_conflict:
    # :force` from a transform), the results become constants of that
    # expression, and Nx.Defn.Expr embeds Nx.BinaryBackend tensors only.
    if Nx.Defn.Compiler.current(),
      do: Composite.traverse(result, &Nx.backend_copy(&1, Nx.BinaryBackend)),
      else: result
  end

  defp run({:evaluator, _reason, device}, args, key, vars, fun, opts) do
    backend = {Emily.Backend, device: device}

    Nx.with_default_backend(backend, fn ->
      [result] = Nx.Defn.Evaluator.__jit__(key, vars, fun, [args], opts)
      result
    end)
  end

  # A program whose loops have hooks runs to the end here, in the order
  # the Evaluator would call its hooks: a hook met before a loop is called
  # once its value is computed, then the loop runs, sending each
  # iteration's hooked values to a channel opened for this run; its hooks
  # are called as they arrive, while the stream's worker goes on with the
  # next iterations (the engine never waits for the host).
  defp run_tapped(entry, refs, overrides) do
    {channel, id} = Native.hook_channel_open()

    try do
      id_ref = id |> Native.scalar_s64({:s, 64}) |> on_device(entry.device)
      outputs = Native.program_run(entry.program, refs ++ [id_ref])
      {results, rest} = Enum.split(outputs, entry.n_out)
      {hook_refs, loop_refs} = Enum.split(rest, entry.n_hook_refs)

      Enum.reduce(entry.schedule, {entry.hook_specs, hook_refs, loop_refs}, fn
        :hook, {[spec | specs], hook_refs, loop_refs} ->
          {_callback, _template, leaves, guarded?} = spec
          {mine, hook_refs} = Enum.split(hook_refs, leaves + if(guarded?, do: 1, else: 0))
          Native.await(Native.eval(nil, mine))
          run_hooks([spec], mine, overrides)
          {specs, hook_refs, loop_refs}

        :loop, {specs, hook_refs, [loop_ref | loop_refs]} ->
          run_loop(loop_ref, channel, id, entry.taps, overrides)
          {specs, hook_refs, loop_refs}
      end)

      results
    after
      Native.hook_channel_close(channel)
    end
  end

  defp run_loop(loop_ref, channel, channel_id, taps, overrides) do
    done = Native.eval(nil, [loop_ref])

    try do
      deliver_taps(channel_id, done, taps, overrides)
    catch
      # A hook raised (or threw): the loop runs to its end regardless (the
      # engine cannot be interrupted); nothing of this run may stay in the
      # mailbox.
      kind, reason ->
        Native.hook_channel_close(channel)
        drain(channel_id, done)
        :erlang.raise(kind, reason, __STACKTRACE__)
    end
  end

  defp drain(channel_id, done) do
    receive do
      {:emily_hook, ^channel_id, _site, _refs} -> drain(channel_id, done)
      {^done, _result} -> flush_taps(channel_id)
    end
  end

  defp flush_taps(channel_id) do
    receive do
      {:emily_hook, ^channel_id, _site, _refs} -> flush_taps(channel_id)
    after
      0 -> :ok
    end
  end

  defp deliver_taps(channel_id, done, taps, overrides) do
    receive do
      {:emily_hook, ^channel_id, site, tap_refs} ->
        run_hooks(Map.fetch!(taps, site), tap_refs, overrides)
        deliver_taps(channel_id, done, taps, overrides)

      {^done, _result} = message ->
        # Every tap was sent before this: await reads the result (and
        # raises an evaluation failure) as for any evaluation.
        send(self(), message)
        Native.await(done)
    end
  end

  defp fill(template, refs) do
    Composite.traverse(template, refs, fn t, [ref | rest] ->
      {%{t | data: %Emily.Backend{ref: ref}}, rest}
    end)
  end

  # The refs of the arguments the program reads (zero-arity functions, as
  # Nx gives them, in parameter order: only those of `used` are called), on
  # the program's device. Tensors of other backends are copied in.
  defp input_refs(args, used, device) do
    refs = args |> select_used(used, 0) |> Enum.map(&input_ref(&1.(), device))

    case Native.array_devices(refs) do
      :cpu when device == 0 -> refs
      _ -> Enum.map(refs, &on_device(&1, device))
    end
  end

  defp select_used(_args, [], _i), do: []
  defp select_used([arg | args], [i | used], i), do: [arg | select_used(args, used, i + 1)]
  defp select_used([_arg | args], used, i), do: select_used(args, used, i + 1)

  defp input_ref(%T{data: %Emily.Backend{ref: ref}}, _device), do: ref

  defp input_ref(%T{data: %Nx.Defn.Expr{}} = t, _device) do
    raise ArgumentError,
          "cannot pass a tensor expression as argument to defn, got: #{inspect(t)}"
  end

  defp input_ref(%T{} = t, device) do
    t = Nx.devectorize(t)
    Nx.backend_copy(t, {Emily.Backend, device: Emily.Device.from_index(device)}).data.ref
  end

  defp on_device(ref, device) do
    if Native.array_device(ref) == device, do: ref, else: Native.to_device(ref, device)
  end

  defp run_hooks(specs, refs, overrides) do
    Enum.reduce(specs, refs, fn {callback_spec, template, n, guarded?}, refs ->
      {fire?, refs} =
        if guarded? do
          [guard | refs] = refs

          {Nx.to_number(%T{type: {:u, 8}, shape: {}, names: [], data: %Emily.Backend{ref: guard}}) !=
             0, refs}
        else
          {true, refs}
        end

      {value_refs, refs} = Enum.split(refs, n)

      if fire? do
        {value, []} = fill(template, value_refs)

        case resolve_hook(callback_spec, overrides) do
          nil -> :ok
          fun -> fun.(value)
        end
      end

      refs
    end)

    :ok
  end

  defp resolve_hook({:fn, fun}, _hooks), do: fun
  defp resolve_hook({:named, name, callback}, hooks), do: hooks[name] || callback
end

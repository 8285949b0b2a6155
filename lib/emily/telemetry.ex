defmodule Emily.Telemetry do
  @moduledoc """
  Telemetry events, with the API of the `:telemetry` library.

  There is no Hex here, so Emily carries its own dispatcher: `attach/4`,
  `attach_many/4`, `detach/1`, `execute/3` and `span/3` take and pass the
  same arguments as their `:telemetry` namesakes, and handlers are called in
  the process that emits the event. When the `:telemetry` module is loaded
  (it is as soon as anything attached a handler with it), every event is
  also forwarded to `:telemetry.execute/3`, so an application's existing
  handlers receive Emily's events unchanged.

  A handler that raises is detached and the failure logged, as
  `:telemetry` does.

  ## Events

    * `[:emily, :eval, :start | :stop | :exception]` — a span around
      `Emily.eval/1`. Metadata `%{}`.
    * `[:emily, :async_eval, :start | :stop | :exception]` — a span around
      `Emily.async_eval/1` (it measures the enqueueing). Metadata `%{}`.
    * `[:emily, :to_binary, :start | :stop | :exception]` — a span around
      `Emily.to_binary/1`. Metadata `:shape` (a list) and `:dtype`; the stop
      event adds `:byte_size`.
    * `[:emily, :memory, :stats]` — emitted by `Emily.Memory.stats/0`, with
      measurements `:active`, `:peak` and `:cache` (bytes).
    * `[:emily, :compiler, :trace]` — emitted when `Emily.Tensor.Compiler.jit/2`
      traces a function into a program (a cache miss). Measurement
      `:duration` (native time units: tracing, simplifying and building the
      program). Metadata `:nodes_before` and `:nodes_after` (op nodes before
      and after simplification), `:fused_kernels`, `:constants` (captured
      arrays), `:arity` and `:signature` (the arguments' structure, shapes
      and types; the cache key).
    * `[:emily, :defn, :compile]` — emitted when `Emily.Compiler` (the
      `Nx.Defn.Compiler`) compiles an expression (a cache miss).
      Measurement `:duration` (native time units: building the expression,
      lowering it and building the program). Metadata `:mode` (`:program`,
      or `:evaluator` when the expression cannot be one program, with
      `:reason`), `:arity` (tensor arguments), and for programs
      `:nodes_before`, `:nodes_after`, `:fused_kernels` and `:hooks`.
    * `[:emily, :program, :run, :start | :stop | :exception]` — a span
      around each call of a jitted function after its program is found or
      built: the replay, which builds the lazy graph on the new arguments
      (evaluation happens later, when results are read). Metadata
      `:signature`.

  Spans measure as `:telemetry.span/3` does: `:start` has `:monotonic_time`
  and `:system_time`; `:stop` and `:exception` have `:duration` and
  `:monotonic_time` (native time units); `:exception` metadata adds `:kind`,
  `:reason` and `:stacktrace`; every span event carries
  `:telemetry_span_context`.
  """

  use GenServer
  require Logger

  # :telemetry is optional (see the forwarding in execute/3).
  @compile {:no_warn_undefined, :telemetry}

  @table __MODULE__
  @attached {__MODULE__, :attached?}

  @type event_name :: [atom(), ...]
  @type event_prefix :: [atom()]
  @type handler_id :: term()
  @type handler_function ::
          (event_name(), map(), map(), term() -> any())
  @type span_result :: {term(), map()} | {term(), map(), map()}

  @doc false
  def start_link(_opts \\ []), do: GenServer.start_link(__MODULE__, :ok, name: __MODULE__)

  @impl GenServer
  def init(:ok) do
    # Events are dispatched straight from the table by the emitting process;
    # this process only owns it and serialises attach/detach.
    :ets.new(@table, [:bag, :protected, :named_table, read_concurrency: true])
    update_attached()
    {:ok, nil}
  end

  # Whether any handler is attached, kept where every process reads it for a
  # few nanoseconds: spans skip their clock reads and event maps when nobody
  # listens. It changes only on attach/detach (a persistent_term update is
  # costly, but these are rare).
  defp update_attached do
    attached? = :ets.info(@table, :size) > 0

    if :persistent_term.get(@attached, nil) != attached? do
      :persistent_term.put(@attached, attached?)
    end
  end

  defp listening? do
    :persistent_term.get(@attached, false) or function_exported?(:telemetry, :execute, 3)
  end

  @impl GenServer
  def handle_call({:attach, id, events, fun, config}, _from, state) do
    if :ets.match_object(@table, {:_, id, :_, :_}) != [] do
      {:reply, {:error, :already_exists}, state}
    else
      :ets.insert(@table, for(event <- events, do: {event, id, fun, config}))
      update_attached()
      {:reply, :ok, state}
    end
  end

  def handle_call({:detach, id}, _from, state) do
    case :ets.match_object(@table, {:_, id, :_, :_}) do
      [] ->
        {:reply, {:error, :not_found}, state}

      entries ->
        Enum.each(entries, &:ets.delete_object(@table, &1))
        update_attached()
        {:reply, :ok, state}
    end
  end

  @doc """
  Attaches `function` to `event_name` under the unique `handler_id`.

  `function.(event_name, measurements, metadata, config)` is called for
  every matching event. Returns `{:error, :already_exists}` when the id is
  taken.
  """
  @spec attach(handler_id(), event_name(), handler_function(), term()) ::
          :ok | {:error, :already_exists}
  def attach(handler_id, event_name, function, config) do
    attach_many(handler_id, [event_name], function, config)
  end

  @doc "Attaches `function` to each of `event_names` under one `handler_id`."
  @spec attach_many(handler_id(), [event_name()], handler_function(), term()) ::
          :ok | {:error, :already_exists}
  def attach_many(handler_id, event_names, function, config)
      when is_list(event_names) and is_function(function, 4) do
    Enum.each(event_names, fn
      [_ | _] = name -> if Enum.all?(name, &is_atom/1), do: :ok, else: bad_event!(name)
      name -> bad_event!(name)
    end)

    GenServer.call(__MODULE__, {:attach, handler_id, event_names, function, config})
  end

  defp bad_event!(name) do
    raise ArgumentError,
          "Emily.Telemetry: an event name must be a non-empty list of atoms, got: #{inspect(name)}"
  end

  @doc "Detaches the handler `handler_id` from every event."
  @spec detach(handler_id()) :: :ok | {:error, :not_found}
  def detach(handler_id), do: GenServer.call(__MODULE__, {:detach, handler_id})

  @doc """
  Emits `event_name` with `measurements` (a map, or a number taken as
  `%{value: number}`) and `metadata` to every handler attached to it, then
  to `:telemetry` when it is loaded.
  """
  @spec execute(event_name(), map() | number(), map()) :: :ok
  def execute(event_name, measurements, metadata \\ %{})

  def execute(event_name, value, metadata) when is_number(value),
    do: execute(event_name, %{value: value}, metadata)

  def execute(event_name, measurements, metadata)
      when is_map(measurements) and is_map(metadata) do
    if :ets.whereis(@table) != :undefined do
      for {_, id, fun, config} <- :ets.lookup(@table, event_name) do
        try do
          fun.(event_name, measurements, metadata, config)
        catch
          kind, reason ->
            # As :telemetry does: a failing handler is detached, not retried.
            spawn(fn -> detach(id) end)

            Logger.error(
              "Emily.Telemetry: handler #{inspect(id)} failed on #{inspect(event_name)} " <>
                "and was detached: " <> Exception.format(kind, reason, __STACKTRACE__)
            )
        end
      end
    end

    # function_exported?/3 is a cheap check that never tries to load the
    # module: :telemetry is loaded as soon as anything attached a handler
    # with it, which is exactly when forwarding matters.
    if function_exported?(:telemetry, :execute, 3) do
      :telemetry.execute(event_name, measurements, metadata)
    end

    :ok
  end

  @doc """
  Runs `fun` inside a span, as `:telemetry.span/3`.

  Emits `event_prefix ++ [:start]`, runs `fun`, which returns
  `{result, stop_metadata}` or `{result, extra_measurements, stop_metadata}`,
  emits `event_prefix ++ [:stop]` and returns `result`. If `fun` raises,
  throws or exits, emits `event_prefix ++ [:exception]` and re-raises.
  """
  @spec span(event_prefix(), map(), (() -> span_result())) :: term()
  def span(event_prefix, start_metadata, fun)
      when is_list(event_prefix) and is_function(fun, 0) do
    if listening?() do
      run_span(event_prefix, start_metadata, fun)
    else
      elem(fun.(), 0)
    end
  end

  defp run_span(event_prefix, start_metadata, fun) do
    start_time = System.monotonic_time()
    context = make_ref()
    metadata = Map.put(start_metadata, :telemetry_span_context, context)

    execute(
      event_prefix ++ [:start],
      %{monotonic_time: start_time, system_time: System.system_time()},
      metadata
    )

    {result, extra, stop_metadata} =
      try do
        case fun.() do
          {result, stop_metadata} -> {result, %{}, stop_metadata}
          {result, extra, stop_metadata} -> {result, extra, stop_metadata}
        end
      catch
        kind, reason ->
          stacktrace = __STACKTRACE__
          stop_time = System.monotonic_time()

          execute(
            event_prefix ++ [:exception],
            %{duration: stop_time - start_time, monotonic_time: stop_time},
            Map.merge(metadata, %{kind: kind, reason: reason, stacktrace: stacktrace})
          )

          :erlang.raise(kind, reason, stacktrace)
      end

    stop_time = System.monotonic_time()

    execute(
      event_prefix ++ [:stop],
      Map.merge(extra, %{duration: stop_time - start_time, monotonic_time: stop_time}),
      Map.put(stop_metadata, :telemetry_span_context, context)
    )

    result
  end

  @doc "Same as `Emily.Memory.stats/0` (which emits `[:emily, :memory, :stats]`)."
  @spec memory_stats() :: Emily.Memory.stats()
  def memory_stats, do: Emily.Memory.stats()
end

defmodule Emily.Telemetry do
  @moduledoc """
  The telemetry events Emily emits, through the `:telemetry` library.

  Attach handlers with `:telemetry.attach/4` or `:telemetry.attach_many/4`
  as for any other library: Emily's events reach an application's existing
  handlers, and tools built on `:telemetry` (`Telemetry.Metrics`,
  reporters) see them unchanged.

      :telemetry.attach("log-reads", [:emily, :to_binary, :stop], fn _event, m, meta, _ ->
        IO.puts("read \#{meta.byte_size} bytes in \#{m.duration} native units")
      end, nil)

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
    * `[:emily, :defn, :compile]` — emitted when `Emily.Compiler` compiles
      a `defn` function (a cache miss). Measurement `:duration` (native time
      units). Metadata `:mode` (`:program`, or `:evaluator` with a
      `:reason`), `:arity` and, for programs, `:nodes_before`,
      `:nodes_after`, `:fused_kernels` and `:hooks` (hooks inside `while`
      loops included).
    * `[:emily, :bumblebee, :fast_kernels]` — emitted by
      `Emily.Bumblebee.FastKernels.apply/1`, with the counts of layers
      rewritten as measurements (`:rms_norm`, `:layer_norm`,
      `:rotary_embedding`, `:attention`, `:attention_skipped`).

  Spans measure as `:telemetry.span/3` does: `:start` has `:monotonic_time`
  and `:system_time`; `:stop` and `:exception` have `:duration` and
  `:monotonic_time` (native time units); `:exception` metadata adds `:kind`,
  `:reason` and `:stacktrace`; every span event carries
  `:telemetry_span_context`.
  """

  @type event_name :: [atom(), ...]
  @type event_prefix :: [atom(), ...]
  @type handler_id :: term()
  @type handler_function :: (event_name(), map(), map(), term() -> any())
  @type span_result :: {term(), map()} | {term(), map(), map()}

  @doc """
  Attaches `function` to `event_name` under the unique `handler_id`
  (`:telemetry.attach/4`, with the event name checked first).
  """
  @spec attach(handler_id(), event_name(), handler_function(), term()) ::
          :ok | {:error, :already_exists}
  def attach(handler_id, event_name, function, config),
    do: attach_many(handler_id, [event_name], function, config)

  @doc "Attaches `function` to each of `event_names` (`:telemetry.attach_many/4`)."
  @spec attach_many(handler_id(), [event_name()], handler_function(), term()) ::
          :ok | {:error, :already_exists}
  def attach_many(handler_id, event_names, function, config)
      when is_list(event_names) and is_function(function, 4) do
    # :telemetry answers a bad name with a bare badarg; name the problem.
    Enum.each(event_names, fn
      [_ | _] = name -> if Enum.all?(name, &is_atom/1), do: :ok, else: bad_event!(name)
      name -> bad_event!(name)
    end)

    :telemetry.attach_many(handler_id, event_names, function, config)
  end

  defp bad_event!(name) do
    raise ArgumentError,
          "Emily.Telemetry: an event name must be a non-empty list of atoms, got: #{inspect(name)}"
  end

  @doc "Detaches the handler `handler_id` (`:telemetry.detach/1`)."
  @spec detach(handler_id()) :: :ok | {:error, :not_found}
  def detach(handler_id), do: :telemetry.detach(handler_id)

  @doc """
  Emits `event_name` with `measurements` (a map, or a number taken as
  `%{value: number}`) and `metadata` (`:telemetry.execute/3`).
  """
  @spec execute(event_name(), map() | number(), map()) :: :ok
  def execute(event_name, measurements, metadata \\ %{})

  def execute(event_name, value, metadata) when is_number(value),
    do: execute(event_name, %{value: value}, metadata)

  def execute(event_name, measurements, metadata)
      when is_list(event_name) and is_map(measurements) and is_map(metadata),
      do: :telemetry.execute(event_name, measurements, metadata)

  @doc """
  Runs `fun` inside a span (`:telemetry.span/3`): `fun` returns
  `{result, stop_metadata}` or `{result, extra_measurements, stop_metadata}`,
  and the span returns `result`.
  """
  @spec span(event_prefix(), map(), (-> span_result())) :: term()
  def span(event_prefix, start_metadata, fun)
      when is_list(event_prefix) and is_map(start_metadata) and is_function(fun, 0),
      do: :telemetry.span(event_prefix, start_metadata, fun)

  @doc "Same as `Emily.Memory.stats/0` (which emits `[:emily, :memory, :stats]`)."
  @spec memory_stats() :: Emily.Memory.stats()
  def memory_stats, do: Emily.Memory.stats()
end

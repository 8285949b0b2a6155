defmodule Emily.TelemetryTest do
  # Handlers are global: run alone so other tests' events do not arrive here.
  use ExUnit.Case, async: false

  import EmilyTest.Helpers
  alias Emily.Native

  setup context do
    id = {__MODULE__, context.test}
    on_exit(fn -> Emily.Telemetry.detach(id) end)
    {:ok, id: id}
  end

  defp forward(id, events) do
    pid = self()

    :ok =
      Emily.Telemetry.attach_many(
        id,
        events,
        fn event, measurements, metadata, config ->
          send(pid, {:event, event, measurements, metadata, config})
        end,
        :my_config
      )
  end

  test "eval emits a start/stop span", %{id: id} do
    forward(id, [[:emily, :eval, :start], [:emily, :eval, :stop]])
    t = Native.add(tensor([1.0], {:f, 32}), tensor([2.0], {:f, 32}))
    assert Emily.eval(t) == :ok

    assert_received {:event, [:emily, :eval, :start], %{monotonic_time: _, system_time: _},
                     start_meta, :my_config}

    assert_received {:event, [:emily, :eval, :stop], %{duration: duration}, stop_meta, :my_config}
    assert is_integer(duration) and duration >= 0
    assert %{telemetry_span_context: ctx} = start_meta
    assert stop_meta.telemetry_span_context == ctx
  end

  test "to_binary carries shape and dtype, and byte_size on stop", %{id: id} do
    forward(id, [[:emily, :to_binary, :start], [:emily, :to_binary, :stop]])
    t = tensor([1, 2, 3, 4, 5, 6], {:s, 16}, [2, 3])
    Emily.to_binary(t)

    assert_received {:event, [:emily, :to_binary, :start], _, %{shape: [2, 3], dtype: {:s, 16}},
                     _}

    assert_received {:event, [:emily, :to_binary, :stop], %{duration: _},
                     %{shape: [2, 3], dtype: {:s, 16}, byte_size: 12}, _}
  end

  test "async_eval emits a span", %{id: id} do
    forward(id, [[:emily, :async_eval, :start], [:emily, :async_eval, :stop]])
    :ok = Emily.async_eval([tensor([1], {:u, 8})])
    assert_received {:event, [:emily, :async_eval, :start], _, _, _}
    assert_received {:event, [:emily, :async_eval, :stop], _, _, _}
  end

  test "a failure emits the exception event and re-raises", %{id: id} do
    forward(id, [[:emily, :to_binary, :exception], [:emily, :to_binary, :stop]])
    stream = Emily.Stream.new()
    Emily.Stream.close(stream)

    assert_raise RuntimeError, fn ->
      Emily.Stream.with_stream(stream, fn -> Emily.to_binary(tensor([1], {:u, 8})) end)
    end

    assert_received {:event, [:emily, :to_binary, :exception], %{duration: _},
                     %{kind: :error, reason: %RuntimeError{}, stacktrace: [_ | _], shape: [1]}, _}

    refute_received {:event, [:emily, :to_binary, :stop], _, _, _}
  end

  test "memory stats event", %{id: id} do
    forward(id, [[:emily, :memory, :stats]])
    stats = Emily.Memory.stats()
    assert_received {:event, [:emily, :memory, :stats], measurements, %{}, _}
    assert measurements == Map.take(stats, [:active, :peak, :cache])

    assert Emily.Telemetry.memory_stats() |> Map.keys() |> Enum.sort() == [
             :active,
             :cache,
             :limit,
             :peak
           ]
  end

  test "attach, detach and their errors", %{id: id} do
    forward(id, [[:my, :event]])

    assert {:error, :already_exists} =
             Emily.Telemetry.attach(id, [:other], fn _, _, _, _ -> :ok end, nil)

    Emily.Telemetry.execute([:my, :event], %{value: 1}, %{a: 1})
    assert_received {:event, [:my, :event], %{value: 1}, %{a: 1}, :my_config}
    Emily.Telemetry.execute([:my, :event], 5, %{})
    assert_received {:event, [:my, :event], %{value: 5}, %{}, _}
    assert Emily.Telemetry.detach(id) == :ok
    assert Emily.Telemetry.detach(id) == {:error, :not_found}
    Emily.Telemetry.execute([:my, :event], %{value: 2}, %{})
    refute_received {:event, [:my, :event], _, _, _}

    assert_raise ArgumentError, ~r/event name/, fn ->
      Emily.Telemetry.attach(:x, [], fn _, _, _, _ -> :ok end, nil)
    end
  end

  test "a handler that raises is detached", %{id: id} do
    ExUnit.CaptureLog.capture_log(fn ->
      :ok = Emily.Telemetry.attach(id, [:bad, :event], fn _, _, _, _ -> raise "oops" end, nil)
      assert Emily.Telemetry.execute([:bad, :event], %{}, %{}) == :ok
      Process.sleep(50)
    end)

    assert Emily.Telemetry.detach(id) == {:error, :not_found}
  end

  test "span/3 accepts extra stop measurements", %{id: id} do
    forward(id, [[:my, :span, :stop]])

    assert Emily.Telemetry.span([:my, :span], %{}, fn -> {:result, %{rows: 3}, %{done: true}} end) ==
             :result

    assert_received {:event, [:my, :span, :stop], %{rows: 3, duration: _}, %{done: true}, _}
  end

  test "events reach handlers attached with :telemetry itself" do
    pid = self()
    id = {__MODULE__, :direct}

    :ok =
      :telemetry.attach(id, [:emily, :eval, :stop], fn event, m, _meta, _ ->
        send(pid, {:direct, event, m})
      end, nil)

    try do
      Emily.eval(tensor([1], {:u, 8}))
      assert_received {:direct, [:emily, :eval, :stop], %{duration: _}}
    after
      :telemetry.detach(id)
    end
  end
end

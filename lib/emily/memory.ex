defmodule Emily.Memory do
  @moduledoc """
  The engine allocator's counters and controls.

  Buffers are 64-byte aligned and come from a size-bucketed cache: freed
  buffers go to the cache and are reused. `active` counts live buffers,
  `cache` the cached ones, `peak` the highest `active` since start or the last
  `reset_peak/0`.

  Resource binaries returned by `Emily.to_binary/1` keep their buffer
  alive until the BEAM collects them (see the warning there):
  `:erlang.garbage_collect/0` returns it.
  """

  alias Emily.Native

  @type stats :: %{
          active: non_neg_integer(),
          peak: non_neg_integer(),
          cache: non_neg_integer(),
          limit: non_neg_integer()
        }

  @doc """
  The allocator counters in bytes: `%{active, peak, cache, limit}` (`limit` is
  0 when there is none). Emits `[:emily, :memory, :stats]` with `active`,
  `peak` and `cache` as measurements.
  """
  @spec stats() :: stats()
  def stats do
    stats = Native.memory_stats()
    Emily.Telemetry.execute([:emily, :memory, :stats], Map.delete(stats, :limit), %{})
    stats
  end

  @doc "Resets `peak` to the current `active` bytes."
  @spec reset_peak() :: :ok
  def reset_peak, do: Native.memory_reset_peak()

  @doc "Frees the allocator's cache. Live tensors are never freed."
  @spec clear_cache() :: :ok
  def clear_cache, do: Native.memory_clear_cache()

  @doc """
  Limits `active + cache` to `bytes` (`:infinity` or 0: no limit). An
  evaluation that would exceed it fails with `RuntimeError` after the cache
  has been emptied.
  """
  @spec set_limit(non_neg_integer() | :infinity) :: :ok
  def set_limit(:infinity), do: Native.memory_set_limit(0)

  def set_limit(bytes) when is_integer(bytes) and bytes >= 0, do: Native.memory_set_limit(bytes)

  def set_limit(other) do
    raise ArgumentError,
          "Emily.Memory.set_limit: expected a non-negative integer or :infinity, got: #{inspect(other)}"
  end
end

defmodule Emily.Tensor.Compiler.Cache do
  @moduledoc false
  # Owns the public ETS table where Emily.Tensor.Compiler keeps each jitted
  # function's programs ({{jit_id, signature}, {program, output_signature},
  # last_used, hits}) and counters ({{:stats, jit_id}, hits of evicted
  # entries, misses, evictions}). Callers read and write it directly from their own processes;
  # this process only keeps it alive.
  use GenServer

  def start_link(_opts \\ []), do: GenServer.start_link(__MODULE__, :ok, name: __MODULE__)

  @impl true
  def init(:ok) do
    :ets.new(__MODULE__, [
      :set,
      :public,
      :named_table,
      read_concurrency: true,
      write_concurrency: true
    ])

    {:ok, nil}
  end
end

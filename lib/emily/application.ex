defmodule Emily.Application do
  @moduledoc false
  use Application

  # Emily.Telemetry owns the handler table; Emily.Stream.Default owns the
  # default stream (see Emily.Stream).
  @impl true
  def start(_type, _args) do
    children = [Emily.Telemetry, Emily.Stream.Default]
    Supervisor.start_link(children, strategy: :one_for_one, name: Emily.Supervisor)
  end
end

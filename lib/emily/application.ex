defmodule Emily.Application do
  @moduledoc false
  use Application

  # Emily.Telemetry owns the handler table; Emily.Stream.Default owns the
  # default stream (see Emily.Stream); Emily.Tensor.Compiler.Cache owns the table
  # of jitted functions' programs; Emily.Compiler.Cache the Nx compiler's.
  @impl true
  def start(_type, _args) do
    children = [
      Emily.Telemetry,
      Emily.Stream.Default,
      Emily.Tensor.Compiler.Cache,
      Emily.Compiler.Cache
    ]

    Supervisor.start_link(children, strategy: :one_for_one, name: Emily.Supervisor)
  end
end

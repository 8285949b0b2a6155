defmodule Emily.Application do
  @moduledoc false
  use Application

  # Emily.Stream.Default owns the default stream (see Emily.Stream);
  # Emily.Compiler.Cache owns the Nx compiler's programs.
  @impl true
  def start(_type, _args) do
    children = [Emily.Stream.Default, Emily.Compiler.Cache]
    Supervisor.start_link(children, strategy: :one_for_one, name: Emily.Supervisor)
  end
end

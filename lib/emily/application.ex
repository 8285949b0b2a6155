defmodule Emily.Application do
  @moduledoc false
  use Application

  # Emily.Stream.Default owns the default stream (see Emily.Stream);
  # Emily.Tensor.Compiler.Cache owns the table of the old front-end's jitted
  # functions; Emily.Compiler.Cache the Nx compiler's programs.
  @impl true
  def start(_type, _args) do
    children = [Emily.Stream.Default, Emily.Tensor.Compiler.Cache, Emily.Compiler.Cache]
    Supervisor.start_link(children, strategy: :one_for_one, name: Emily.Supervisor)
  end
end

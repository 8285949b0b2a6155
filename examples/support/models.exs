defmodule Examples.Models do
  @moduledoc false
  # Where scripts/fetch_models.sh (run by scripts/setup.sh) unpacked the
  # real models: $EMILY_MODELS, by default ~/.cache/emily/models.

  def root, do: System.get_env("EMILY_MODELS") || Path.expand("~/.cache/emily/models")

  @doc "The directory of `name`, or exits with how to install it."
  def dir!(name) do
    dir = Path.join(root(), name)

    unless File.exists?(Path.join(dir, ".complete")) do
      IO.puts(:stderr, "model #{name} is not installed in #{root()}: run scripts/fetch_models.sh")
      System.halt(1)
    end

    dir
  end
end

# The NIF build step is a plain Elixir file loaded here rather than compiled
# into the application: it must exist before the project's own code is
# compiled (the NIF has to be built before Emily.Native is loaded), and it is
# a build script, not part of the library.
Code.require_file("lib/mix/tasks/compile.emily_nif.ex", __DIR__)

defmodule Emily.MixProject do
  use Mix.Project

  def project do
    [
      app: :emily,
      version: "0.1.0",
      elixir: "~> 1.14",
      start_permanent: Mix.env() == :prod,
      # The C build runs first so that Emily.Native finds priv/emily_nif.so
      # when it is loaded during compilation and in `mix test`.
      compilers: [:emily_nif] ++ Mix.compilers(),
      # lib/mix holds the build script above; it is not part of the app.
      elixirc_paths: ["lib/emily.ex", "lib/emily"],
      deps: [],
      docs: [main: "Emily"]
    ]
  end

  def application do
    [
      mod: {Emily.Application, []},
      extra_applications: [:logger]
    ]
  end
end

# The NIF build step is a plain Elixir file loaded here rather than compiled
# into the application: it must exist before the project's own code is
# compiled (the NIF has to be built before Emily.Native is loaded), and it is
# a build script, not part of the library.
Code.require_file("lib/mix/tasks/compile.emily_nif.ex", __DIR__)

# Offline machines (no Hex registry) take Nx and its neighbours from the
# vendored sources beside the checkout; Mix must still be able to read the
# Hex entries that those projects' own mix.exs files list, which the stub
# allows (it never fetches). Everywhere else they come from Hex.
vendor = Path.expand("../shared/vendor", __DIR__)

if File.dir?(vendor) and not Code.ensure_loaded?(Hex) do
  Code.require_file(Path.join(vendor, "offline_hex_stub.exs"))
end

defmodule Emily.MixProject do
  use Mix.Project

  def project do
    [
      app: :emily,
      version: "0.1.0",
      elixir: "~> 1.17",
      start_permanent: Mix.env() == :prod,
      # The C build runs first so that Emily.Native finds priv/emily_nif.so
      # when it is loaded during compilation and in `mix test`.
      compilers: [:emily_nif] ++ Mix.compilers(),
      # lib/mix holds the build script above; it is not part of the app.
      elixirc_paths: ["lib/emily.ex", "lib/emily"],
      deps: deps(),
      docs: [main: "Emily"]
    ]
  end

  # nx, complex and telemetry as path dependencies from ../shared/vendor when
  # it exists (override: Nx 0.13 asks for complex ~> 0.7, the vendored
  # snapshot says 0.6.0 with 0.7's behaviour patched in), else from Hex.
  @vendor Path.expand("../shared/vendor", __DIR__)
  defp deps do
    if File.dir?(@vendor) do
      [
        {:nx, path: vendor("nx-0.13.1"), override: true},
        {:complex, path: vendor("complex"), override: true},
        {:telemetry, path: vendor("telemetry-1.3.0"), override: true},
        {:polaris, path: vendor("polaris-0.1.0"), override: true, only: [:dev, :test]},
        # Bumblebee 0.7 asks for axon ~> 0.8.0 (the snapshot says 0.9.0)
        {:axon, path: vendor("axon-0.8.1"), override: true, only: [:dev, :test]}
      ] ++ bumblebee_deps()
    else
      [
        {:nx, "~> 0.13"},
        {:telemetry, "~> 1.3"},
        {:polaris, "~> 0.1", only: [:dev, :test]},
        {:axon, "~> 0.8", only: [:dev, :test]}
      ] ++ bumblebee_deps()
    end
  end

  # Bumblebee, with our pure-Elixir `tokenizers` (tokenizers/) in place of
  # the Hex package of that name (a Rust NIF that cannot be built offline).
  # Offline, Bumblebee's own dependencies come from ../shared/vendor too.
  defp bumblebee_deps do
    local = {:tokenizers, path: "tokenizers", override: true, only: [:dev, :test]}

    if File.dir?(@vendor) do
      [
        local,
        {:bumblebee, path: vendor("bumblebee-0.7.0"), only: [:dev, :test]},
        {:nx_image, path: vendor("nx_image-0.1.2"), override: true, only: [:dev, :test]},
        {:nx_signal, path: vendor("nx_signal-0.2.0"), override: true, only: [:dev, :test]},
        {:unpickler, path: vendor("unpickler-0.1.0"), override: true, only: [:dev, :test]},
        {:safetensors, path: vendor("safetensors-0.1.3"), override: true, only: [:dev, :test]},
        {:jason, path: vendor("jason-1.4.4"), override: true, only: [:dev, :test]},
        {:unzip, path: vendor("unzip-0.13.0"), override: true, only: [:dev, :test]},
        {:progress_bar, path: vendor("progress_bar-3.0.0"), override: true, only: [:dev, :test]},
        {:decimal, path: vendor("decimal-2.3.0"), override: true, only: [:dev, :test]}
      ]
    else
      [local, {:bumblebee, "~> 0.7", only: [:dev, :test]}]
    end
  end

  defp vendor(name), do: Path.join(@vendor, name)

  def application do
    [
      mod: {Emily.Application, []},
      extra_applications: [:logger]
    ]
  end
end

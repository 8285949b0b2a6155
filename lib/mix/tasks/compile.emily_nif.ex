defmodule Mix.Tasks.Compile.EmilyNif do
  @shortdoc "Builds libemily and the Emily NIF (priv/emily_nif.so) with make"

  @moduledoc """
  Builds `priv/emily_nif.so` by running `make nif`.

  This replaces `elixir_make` (there is no Hex here). The path of
  `erl_nif.h` is computed in Elixir from `:code.root_dir/0` and the erts
  version and passed to make as `ERL_INCLUDE`, so make never starts `erl`.

  Options are taken from the environment: `MAKE` (default `make`) and
  `EMILY_MAKE_ARGS` (extra arguments, e.g. `CC=clang`).
  """

  use Mix.Task.Compiler

  @impl Mix.Task.Compiler
  def run(_args) do
    root = File.cwd!()
    # Create priv/ before make: Mix links _build/<env>/lib/emily/priv to it,
    # and a priv/ that appears only later would not be linked on a clean build.
    File.mkdir_p!(Path.join(root, "priv"))

    erl_include =
      Path.join([
        to_string(:code.root_dir()),
        "erts-#{:erlang.system_info(:version)}",
        "include"
      ])

    make = System.get_env("MAKE", "make")
    extra = System.get_env("EMILY_MAKE_ARGS", "") |> String.split(" ", trim: true)
    jobs = "-j#{System.schedulers_online()}"
    args = ["--no-print-directory", jobs, "nif", "ERL_INCLUDE=#{erl_include}" | extra]

    {output, status} = System.cmd(make, args, cd: root, stderr_to_stdout: true)
    Mix.Project.build_structure()

    cond do
      status != 0 ->
        Mix.shell().error(output)
        Mix.raise("#{make} nif failed with exit status #{status}")

      output =~ "is up to date" or output =~ "Nothing to be done" ->
        {:noop, []}

      true ->
        Mix.shell().info(String.trim_trailing(output))
        {:ok, []}
    end
  end

  @impl Mix.Task.Compiler
  def clean do
    File.rm(Path.join(File.cwd!(), "priv/emily_nif.so"))
    :ok
  end
end

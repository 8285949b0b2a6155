# Nx's own test files as the oracle of Emily.Compiler (and Emily.Backend):
# runs files from Nx's test suite with Emily.Compiler as the default defn
# compiler and Emily.Backend as the default backend, and prints pass/fail
# counts per file.
#
#   MIX_ENV=test mix run scripts/nx_suite.exs [--failures] [FILE ...]
#   scripts/nx_suite.sh [--failures] [FILE ...]
#
# FILE is a path relative to Nx's test/ directory (nx/defn/grad_test.exs) or
# absolute; by default every file of test/nx/defn/ and test/nx/defn_test.exs.
# --skip "test name" excludes a test (repeatable).
# --trace prints each test's name as it starts (to find one that hangs).
# --failures prints each failure's test name and first line of message.
# --binary-default keeps Nx.BinaryBackend as the default backend (the
# compiler is still Emily.Compiler): Nx's expression tests build constants
# with the default backend and defn only accepts BinaryBackend tensors as
# constants, so this isolates the compiler from that.
#
# What is changed in the files, and why:
#   * `Nx.Defn.Evaluator` (and the alias `Evaluator` that defn_test.exs makes
#     of it) is replaced by `Emily.Compiler`: the tests that run values pick
#     the Evaluator explicitly, and these are the ones that should run on
#     Emily. Tests that inspect expressions (Nx.Defn.Debug) are unchanged.
#   * `:distributed` tests are excluded (they start peer nodes).
#
# Failures are split in two: an `assert a == b` on tensors compares the
# structs, and so the backends' data: two Emily tensors (or an Emily and a
# BinaryBackend one) holding the same values are never `==`. Such failures
# are counted as "== only" when the two sides hold the same shapes, types
# and bytes; every other failure is "real".

nx_dir = Path.expand("../../shared/vendor/nx-0.13.1", __DIR__)
test_dir = Path.join(nx_dir, "test")

{opts, files} =
  OptionParser.parse!(System.argv(),
    strict: [failures: :boolean, binary_default: :boolean, trace: :boolean, skip: :keep]
  )

# A test stuck in a NIF or a long BIF cannot be interrupted by ExUnit's
# timeout: --skip "test name" excludes it (counted as excluded) so that the
# rest of its file runs.
skips = Enum.map(Keyword.get_values(opts, :skip), &{:test, String.to_atom(&1)})

files =
  case files do
    [] -> [Path.join(test_dir, "nx/defn_test.exs") | Path.wildcard(Path.join(test_dir, "nx/defn/*_test.exs"))]
    files -> Enum.map(files, &Path.expand(&1, test_dir))
  end

defmodule NxSuite.Formatter do
  @moduledoc false
  # Collects every finished test by file: {:passed | :eq_only | :failed |
  # :excluded | :skipped, name, message}.
  use GenServer

  def init(_opts), do: {:ok, %{}}

  def handle_cast({:test_finished, %ExUnit.Test{} = test}, state) do
    file = test.tags[:file]
    entry = {classify(test), "#{inspect(test.module)}: #{test.name}", message(test)}
    {:noreply, Map.update(state, file, [entry], &[entry | &1])}
  end

  def handle_cast({:test_started, %ExUnit.Test{} = test}, state) do
    if :persistent_term.get(:nx_suite_trace, false), do: IO.puts("  running #{inspect(test.module)}: #{test.name}")
    {:noreply, state}
  end

  def handle_cast(_event, state), do: {:noreply, state}

  def handle_call(:results, _from, state), do: {:reply, state, state}

  defp classify(%{state: nil}), do: :passed
  defp classify(%{state: {:excluded, _}}), do: :excluded
  defp classify(%{state: {:skipped, _}}), do: :skipped
  defp classify(%{state: {:invalid, _}}), do: :failed

  defp classify(%{state: {:failed, failures}}) do
    if Enum.all?(failures, &eq_only?/1), do: :eq_only, else: :failed
  end

  defp eq_only?({:error, %ExUnit.AssertionError{left: left, right: right}, _stack}),
    do: same_values?(left, right)

  defp eq_only?(_), do: false

  defp same_values?(%Nx.Tensor{} = a, %Nx.Tensor{} = b) do
    a.shape == b.shape and a.type == b.type and a.names == b.names and
      a.vectorized_axes == b.vectorized_axes and bytes(a) == bytes(b)
  rescue
    _ -> false
  end

  defp same_values?(a, b) when is_tuple(a) and is_tuple(b) and tuple_size(a) == tuple_size(b),
    do: Enum.all?(Enum.zip(Tuple.to_list(a), Tuple.to_list(b)), fn {x, y} -> same_values?(x, y) end)

  defp same_values?(a, b) when is_list(a) and is_list(b) and length(a) == length(b),
    do: Enum.all?(Enum.zip(a, b), fn {x, y} -> same_values?(x, y) end)

  defp same_values?(%{} = a, %{} = b) when not is_struct(a) and not is_struct(b) and map_size(a) == map_size(b),
    do: Enum.all?(a, fn {k, v} -> Map.has_key?(b, k) and same_values?(v, b[k]) end)

  defp same_values?(%mod{} = a, %mod{} = b) when mod != Nx.Tensor,
    do: same_values?(Map.from_struct(a), Map.from_struct(b))

  defp same_values?(a, b), do: a == b

  defp bytes(t), do: t |> Nx.devectorize() |> Nx.to_binary()

  defp message(%{state: {:failed, [{kind, reason, stack} | _]}}) do
    Exception.format_banner(kind, reason, stack)
    |> String.split("\n")
    |> Enum.reject(&(&1 == ""))
    |> Enum.take(2)
    |> Enum.join(" | ")
    |> String.slice(0, 240)
  end

  defp message(_), do: nil
end

# Nx's test support implements Nx.Container and Nx.LazyContainer for its
# own structs at load time: put back the unconsolidated protocols (Mix
# consolidates them for the project) so that those implementations count.
for protocol <- [Nx.Container, Nx.LazyContainer] do
  beam = :code.which(protocol) |> to_string()

  if String.contains?(beam, "consolidated") do
    plain = Path.join(Application.app_dir(:nx, "ebin"), "#{protocol}.beam")
    :code.purge(protocol)
    :code.delete(protocol)
    {:module, ^protocol} = :code.load_abs(String.to_charlist(String.trim_trailing(plain, ".beam")))
  end
end

for support <- ~w(helpers.ex nx_case.ex container.ex backends.ex) do
  Code.require_file(Path.join([test_dir, "support", support]))
end

Nx.global_default_backend(if opts[:binary_default], do: Nx.BinaryBackend, else: Emily.Backend)
Nx.Defn.global_default_options(compiler: Emily.Compiler)

{:ok, formatter} = GenServer.start_link(NxSuite.Formatter, [])

ExUnit.start(
  autorun: false,
  exclude: [:distributed | skips],
  formatters: [],
  assert_receive_timeout: 1000,
  max_cases: 1
)

# ExUnit sends events to the configured formatters; ours is a running
# process, registered by ExUnit's event manager through this shim.
defmodule NxSuite.Shim do
  @moduledoc false
  use GenServer
  def init(opts), do: {:ok, opts[:target] || :persistent_term.get(:nx_suite_formatter)}
  def handle_cast(event, target), do: (GenServer.cast(target, event); {:noreply, target})
end

:persistent_term.put(:nx_suite_formatter, formatter)
:persistent_term.put(:nx_suite_trace, opts[:trace] || false)
ExUnit.configure(formatters: [NxSuite.Shim])

for file <- files do
  source =
    file
    |> File.read!()
    |> String.replace("alias Nx.Defn.{Expr, Debug, Evaluator}", "alias Nx.Defn.{Expr, Debug}\n  alias Emily.Compiler, as: Evaluator")
    |> String.replace("Nx.Defn.Evaluator", "Emily.Compiler")

  # Nx's tests use deprecated functions on purpose: keep their warnings out.
  Code.with_diagnostics(fn -> Code.compile_string(source, file) end)
end

ExUnit.run()
# Events reach the collector through the shim's casts: let them land.
Process.sleep(300)
results = GenServer.call(formatter, :results)

rows =
  for file <- files do
    entries = Map.get(results, file, [])
    counts = Enum.frequencies_by(entries, &elem(&1, 0))
    {Path.relative_to(file, test_dir), entries, counts}
  end

header = "| file | tests | passed | failed (== only) | failed (real) | excluded/skipped |"
IO.puts("\n" <> header)
IO.puts("| --- | ---: | ---: | ---: | ---: | ---: |")

totals =
  Enum.reduce(rows, %{}, fn {name, entries, c}, totals ->
    skipped = Map.get(c, :excluded, 0) + Map.get(c, :skipped, 0)

    IO.puts(
      "| #{name} | #{length(entries)} | #{Map.get(c, :passed, 0)} | #{Map.get(c, :eq_only, 0)} | " <>
        "#{Map.get(c, :failed, 0)} | #{skipped} |"
    )

    Map.merge(totals, Map.put(c, :tests, length(entries)), fn _k, a, b -> a + b end)
  end)

IO.puts(
  "| total | #{totals[:tests] || 0} | #{totals[:passed] || 0} | #{totals[:eq_only] || 0} | " <>
    "#{totals[:failed] || 0} | #{(totals[:excluded] || 0) + (totals[:skipped] || 0)} |"
)

if opts[:failures] do
  for {name, entries, _} <- rows, {kind, test, message} <- Enum.reverse(entries), kind == :failed do
    IO.puts("#{name} :: #{test}\n    #{message}")
  end
end

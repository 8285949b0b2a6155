# Runs test files of Nx 0.13.1 (or Axon 0.8.1) from ../shared/vendor, in
# place, with Emily as the default backend, and prints per file the tests,
# passes, failures and exclusions (with reasons). Usually through
# scripts/nx_oracle.sh:
#
#   MIX_ENV=test mix run test/nx_suite/run.exs MODE [--suite nx|axon] [--failures] [FILE ...]
#
#   MODE      backend:  Emily.Backend as the global default backend; defn
#                       runs on Nx.Defn.Evaluator (over Emily tensors).
#             compiler: the same, and Emily.Compiler as the global default
#                       defn compiler; explicit uses of Nx.Defn.Evaluator in
#                       the tests become Emily.Compiler.
#             binary:   Nx.BinaryBackend and Nx.Defn.Evaluator, no Emily: the
#                       suite as Nx runs it, through this runner (what fails
#                       here fails in Nx itself, or in the runner).
#   --suite   nx (default) or axon.
#   FILE      relative to the suite's test/ directory (nx/lin_alg_test.exs)
#             or absolute; by default every *_test.exs of the suite.
#   --failures  also print each failure's first lines.
#   --trace     print each test's name as it starts (to find one that hangs).
#   --skip NAME leave out the test of that name, as ExUnit names it ("test
#               slice" or "doctest Nx.LinAlg.qr/2 (58)"; repeatable): to
#               run the rest of a file past a test that hangs.
#   --timeout S the per-file time limit in seconds (default 600): a file
#               still running after S seconds (a test stuck in a NIF
#               ignores ExUnit's timeouts) ends the run with status 2,
#               naming the tests running and printing the table so far.
#               scripts/nx_oracle.sh also kills the whole run after
#               NX_ORACLE_TIMEOUT seconds (default 3600) with SIGKILL.
#   --binary-default  (compiler mode) Nx.BinaryBackend stays the default
#               backend, Emily.Compiler still compiles defn: isolates the
#               compiler from what Emily.Backend as the default changes
#               (constants Nx.Defn.Expr builds from default-backend
#               tensors, for one).
#
# A failing `==` of tensors is a real failure: NxSuite.Compare makes `==`
# compare types, shapes, names and bytes, not backend structs.
#
# Exits 1 if a test that is not excluded fails, or if an exclusion of
# test/nx_suite/exclusions.exs names a test that no longer exists in the
# files run; 2 on the time limit. `:distributed` tests (they start peer nodes) are not run, nor
# Axon's `:integration` tests (its own test_helper leaves them out).

Code.require_file("nx_suite.exs", __DIR__)

{opts, args} =
  OptionParser.parse!(System.argv(),
    strict: [suite: :string, failures: :boolean, trace: :boolean, skip: :keep, timeout: :integer, binary_default: :boolean]
  )

mode =
  case args do
    [mode | _] when mode in ["backend", "compiler", "binary"] -> String.to_atom(mode)
    _ -> raise ArgumentError, "usage: run.exs backend|compiler|binary [--suite nx|axon] [--failures] [FILE ...]"
  end

suite = String.to_atom(opts[:suite] || "nx")
vendor = Path.expand("../shared/vendor", File.cwd!())

compiler =
  case mode do
    mode when mode in [:backend, :binary] ->
      Nx.Defn.Evaluator

    :compiler ->
      unless Code.ensure_loaded?(Emily.Compiler) and function_exported?(Emily.Compiler, :__jit__, 5) do
        raise ArgumentError, "compiler mode needs Emily.Compiler, the Nx.Defn.Compiler of branch nx-compiler"
      end

      Emily.Compiler
  end

# What differs between the suites: where they live, their support files,
# what ExUnit leaves out, and the text substitutions that point the tests
# at Emily.
if opts[:binary_default] && mode != :compiler, do: raise(ArgumentError, "--binary-default is for compiler mode")
backend = if mode == :binary or opts[:binary_default], do: Nx.BinaryBackend, else: Emily.Backend

{root, support, exclude, substitutions} =
  case suite do
    :nx ->
      # defn_test.exs aliases the Evaluator with others; explicit uses of it
      # are the tests that run values, and in compiler mode run on Emily.
      #
      # Nx.Serving.new/3 merges Nx.Defn.default_options() into the
      # defn_options it gives the serving's callbacks, so the compiler set as
      # the default below shows there, as `compiler: EXLA` does for anyone
      # who sets EXLA as the default; serving_test.exs's expectations were
      # written with no default options set, and are completed with it.
      evaluator =
        if compiler == Nx.Defn.Evaluator,
          do: [],
          else: [
            {"alias Nx.Defn.{Expr, Debug, Evaluator}", "alias Nx.Defn.{Expr, Debug}\n  alias #{inspect(compiler)}, as: Evaluator"},
            {"Nx.Defn.Evaluator", inspect(compiler)},
            {"nx/serving_test.exs", "[[batch_keys: [:default]", "[[batch_keys: [:default], compiler: #{inspect(compiler)}"}
          ]

      {Path.join(vendor, "nx-0.13.1/test"), ~w(helpers.ex nx_case.ex container.ex backends.ex distributed_servings.ex),
       [:distributed], evaluator}

    :axon ->
      # AxonTestUtil picks Nx.BinaryBackend and Nx.Defn.Evaluator unless
      # USE_EXLA/USE_TORCHX are set; Axon.Case sets them for every test.
      {Path.join(vendor, "axon-0.8.1/test"), ~w(axon_test_util.ex cases/axon_case.ex), [integration: true],
       [{"true -> Nx.BinaryBackend", "true -> #{inspect(backend)}"}, {"else: Nx.Defn.Evaluator", "else: #{inspect(compiler)}"}]}
  end

# Nx's and Axon's tests read fixtures relative to their project's root,
# print paths relative to it, and some write there too (Axon's checkpoint
# tests). ../shared is read-only in CI, so the suite runs from a scratch
# directory whose entries link to the project root's: reads find the
# fixtures, writes stay in the scratch, and the files are compiled from
# their paths under it.
project = Path.dirname(root)
scratch = Path.join(System.tmp_dir!(), "emily_nx_suite_#{System.unique_integer([:positive])}")
File.mkdir_p!(scratch)
for entry <- File.ls!(project), do: File.ln_s!(Path.join(project, entry), Path.join(scratch, entry))
File.cd!(scratch)
root = Path.join(scratch, Path.basename(root))

files =
  case tl(args) do
    [] -> Path.wildcard(Path.join(root, "**/*_test.exs"))
    files -> Enum.map(files, &Path.expand(&1, root))
  end

NxSuite.Exclusions.load!(suite, mode)

title = "#{suite} suite, #{mode} mode (#{inspect(backend)}, #{inspect(compiler)} as the defn compiler)"

ExUnit.start(
  autorun: false,
  exclude: exclude ++ Enum.map(Keyword.get_values(opts, :skip), &{:test, String.to_atom(&1)}),
  # No random order: runs compare with each other.
  seed: 0,
  assert_receive_timeout: 1000,
  formatters: [NxSuite.Report],
  # Read by NxSuite.Report.init/1 through ExUnit's configuration.
  nx_suite: [root: root, files: files, title: title, failures: opts[:failures], trace: opts[:trace], timeout: opts[:timeout] || 600]
)

# The suites derive Nx.Container and implement Nx.LazyContainer for structs
# of their own, which a consolidated protocol (Mix consolidates them for
# `mix run`) does not dispatch to: load these two unconsolidated, as Nx's
# own mix.exs does for its tests.
for protocol <- [Nx.Container, Nx.LazyContainer] do
  beam = Path.join(Application.app_dir(:nx, "ebin"), "#{protocol}.beam")
  :code.purge(protocol)
  {:module, ^protocol} = :code.load_abs(String.to_charlist(Path.rootname(beam)))
end

# Nx and Axon run their tests with Logger at :debug (neither configures
# it), and some capture debug logs (Axon's `debug: true` instrumentation);
# this project's test config says :warning. Everything reaches the
# handlers, but the console still shows warnings only.
Logger.configure(level: :debug)
:ok = :logger.set_handler_config(:default, :level, :warning)


for file <- support, do: NxSuite.Source.compile(Path.join([root, "support", file]), "support/" <> file, substitutions)
for file <- files, do: NxSuite.Source.compile(file, Path.relative_to(file, root), substitutions)

# Set once the files are compiled: tensors built at compile time (module
# attributes) stay Nx.BinaryBackend's, as an Emily tensor holds a reference
# that cannot be escaped into code. Operations on them with Emily tensors
# copy them in.
# In backend and binary modes defn keeps Nx's default compiler (setting it
# would show in the options Nx.Serving passes to its callbacks).
Nx.global_default_backend(backend)
if compiler != Nx.Defn.Evaluator, do: Nx.Defn.global_default_options(compiler: compiler)

%{failures: failures} = ExUnit.run()

stale = NxSuite.Exclusions.unapplied(Enum.map(files, &Path.relative_to(&1, root)))
for key <- stale, do: IO.puts("stale exclusion (no such test): #{inspect(key)}")

File.cd!(System.tmp_dir!())
File.rm_rf(scratch)
System.halt(if failures == 0 and stale == [], do: 0, else: 1)

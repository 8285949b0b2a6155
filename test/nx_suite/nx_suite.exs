# The machinery of the suite runner (test/nx_suite/run.exs): how the test
# files of Nx and Axon are loaded in place, which tests are excluded, how
# `==` on tensors is judged, and the per-file report.

defmodule NxSuite.Exclusions do
  @moduledoc false
  # The exclusions of test/nx_suite/exclusions.exs, applied while the test
  # files compile: every test module calls module_tag/2 first, every test
  # calls test_tag/3 before it is defined, and every doctest asks
  # doctest_tags/3 (see NxSuite.Source and NxSuite.DocTest). A skip tag's
  # text is "category: reason". Applied keys are recorded so that the
  # report can name stale exclusions.

  @table __MODULE__

  @doc """
  The exclusions that apply in `mode` (:backend, :compiler or :binary):
  %{nx: ..., nx_doctests: ..., axon: ..., axon_doctests: ...}, each value
  {category, reason}. An entry of exclusions.exs written {category,
  reason, modes} applies in those modes only (what fails because of
  Emily.Compiler, say, runs in backend mode); {category, reason} in all.
  """
  def all(mode \\ :backend) do
    Path.join(__DIR__, "exclusions.exs")
    |> Code.eval_file()
    |> elem(0)
    |> Map.new(fn {group, entries} -> {group, for_mode(entries, mode)} end)
  end

  defp for_mode(entries, mode) do
    for {key, value} <- entries, entry = in_mode(value, mode), into: %{}, do: {key, entry}
  end

  defp in_mode({category, reason}, _mode), do: {category, reason}
  defp in_mode({category, reason, modes}, mode) when is_list(modes), do: if(mode in modes, do: {category, reason})

  def load!(suite, mode) do
    all = all(mode)
    :ets.new(@table, [:named_table, :public, :set])
    :ets.insert(@table, {:entries, Map.fetch!(all, suite)})
    :ets.insert(@table, {:doctests, Map.fetch!(all, :"#{suite}_doctests")})
    :ok
  end

  defp entries, do: :ets.lookup_element(@table, :entries, 2)

  def module_tag(module, file) do
    if reason = entries()[file], do: skip(module, :moduletag, file, reason)
  end

  # A test of an excluded file has its module's tag already.
  def test_tag(module, file, name) do
    reason = entries()[{file, name}]
    if reason && !entries()[file], do: skip(module, :tag, {file, name}, reason)
  end

  defp skip(module, attribute, key, reason) do
    applied(key)
    Module.put_attribute(module, attribute, skip: text(reason))
  end

  defp applied(key), do: :ets.insert(@table, {{:applied, key}, true})

  def text({category, reason}), do: "#{category}: #{reason}"

  @doc """
  `tags` with a skip tag when the doctest `name` ("Nx.LinAlg.qr/2 (58)")
  is excluded: by its name, or as one of its function's doctests.
  """
  def doctest_tags(name, tags, doctests \\ :ets.lookup_element(@table, :doctests, 2)) do
    [function, _index] = String.split(name, " ", parts: 2)

    key =
      if Map.has_key?(doctests, name),
        do: name,
        else: Enum.find(Map.keys(doctests), &(is_tuple(&1) and function_name(&1) == function))

    if key do
      if :ets.whereis(@table) != :undefined, do: applied(key)
      Keyword.put(tags, :skip, text(doctests[key]))
    else
      tags
    end
  end

  @doc "A doctest exclusion key's function, as doctest names spell it."
  def function_name({module, fun, arity}), do: "#{inspect(module)}.#{fun}/#{arity}"

  @doc "Exclusions of `files` that matched no test: stale entries."
  def unapplied(files) do
    for {key, _} <- entries(),
        (if is_tuple(key), do: elem(key, 0), else: key) in files,
        :ets.lookup(@table, {:applied, key}) == [],
        do: key
  end

  @doc "The category of a skip tag's text, as written by text/1."
  def category(text) do
    case String.split(text, ":", parts: 2) do
      [category, _] -> String.to_existing_atom(category)
      _ -> :other
    end
  rescue
    ArgumentError -> :other
  end
end

defmodule NxSuite.DocTest do
  @moduledoc false
  # ExUnit's `doctest/2`, with a skip tag on each excluded doctest (ExUnit's
  # own `:except` removes whole functions, and the report would not count
  # them). The body is ExUnit.DocTest's macro (Elixir 1.18), which
  # generates the tests through ExUnit.DocTest.__doctests__/2; `exclusions`
  # is a `*_doctests:` map of exclusions.exs, nil for the runner's suite.

  defmacro doctest(module, opts \\ [], exclusions \\ nil) do
    quote bind_quoted: [
            module: module,
            opts: opts,
            exclusions: exclusions,
            env_line: __CALLER__.line,
            env_file: __CALLER__.file
          ] do
      file = ExUnit.DocTest.__file__(module)

      for {name, test, tags} <- ExUnit.DocTest.__doctests__(module, opts) do
        tags =
          if exclusions,
            do: NxSuite.Exclusions.doctest_tags(name, tags, exclusions),
            else: NxSuite.Exclusions.doctest_tags(name, tags)

        @file file
        doc = ExUnit.Case.register_test(__MODULE__, env_file, env_line, :doctest, name, tags)
        def unquote(doc)(_), do: unquote(test)
      end
    end
  end
end

defmodule NxSuite.Compare do
  @moduledoc false
  # Nx's tests compare tensors with `==`, which compares the structs and so
  # the backends' data: two Nx.BinaryBackend tensors holding the same bytes
  # are equal, two Emily tensors never are (each holds its own engine
  # reference). NxSuite.Source wraps both operands of every `==` and `!=`
  # in comparable/1, which copies Emily tensors (anywhere in a term) to
  # Nx.BinaryBackend: the comparison is then the one Nx's suite makes,
  # with the same names, types, shapes, vectorized axes and bytes.

  def comparable(%Nx.Tensor{data: %Emily.Backend{}} = t) do
    Nx.backend_copy(t, Nx.BinaryBackend)
  rescue
    # A deallocated tensor compares as itself.
    ArgumentError -> t
  end

  def comparable(%Nx.Tensor{} = t), do: t
  def comparable(list) when is_list(list), do: Enum.map(list, &comparable/1)

  def comparable(tuple) when is_tuple(tuple),
    do: tuple |> Tuple.to_list() |> Enum.map(&comparable/1) |> List.to_tuple()

  def comparable(%_{} = struct) do
    Enum.reduce(Map.from_struct(struct), struct, fn {k, v}, acc -> %{acc | k => comparable(v)} end)
  end

  def comparable(%{} = map), do: Map.new(map, fn {k, v} -> {k, comparable(v)} end)
  def comparable(other), do: other
end

defmodule NxSuite.Source do
  @moduledoc false
  # Loads one test file of the suite in place: its source is read from the
  # vendored tree, rewritten as below, and compiled; nothing is copied.
  #
  #   * every `a == b` / `a != b` outside defn code compares
  #     NxSuite.Compare.comparable/1 of both sides (defn's `==` is
  #     Nx.equal/2 and is left alone, as are guards);
  #   * every test module, `test` call and `doctest` call first asks
  #     NxSuite.Exclusions for skip tags;
  #   * `substitutions` (the mode's: `Nx.Defn.Evaluator` becomes
  #     `Emily.Compiler` in compiler mode; Axon's choice of backend and
  #     compiler) are made on the text: {from, to} in every file,
  #     {file, from, to} in that file only (raising if `from` is not there).

  @defn [:defn, :defnp, :defn_, :defnp_]

  def compile(path, key, substitutions) do
    source =
      Enum.reduce(substitutions, File.read!(path), fn
        {from, to}, text ->
          String.replace(text, from, to)

        # A file's own substitution must apply: one that no longer matches
        # the vendored text is stale.
        {^key, from, to}, text ->
          unless String.contains?(text, from), do: raise(ArgumentError, "stale substitution for #{key}: #{inspect(from)}")
          String.replace(text, from, to)

        {_other_file, _from, _to}, text ->
          text
      end)

    ast = Code.string_to_quoted!(source, file: path)
    ast = walk(ast, %{key: key, describe: nil})
    # Nx's tests call deprecated functions on purpose: keep their warnings out.
    Code.with_diagnostics(fn -> Code.compile_quoted(ast, path) end)
  end

  defp walk({kind, _, _} = node, _ctx) when kind in @defn, do: node

  defp walk({:when, meta, args}, ctx) do
    {args, [guard]} = Enum.split(args, -1)
    {:when, meta, Enum.map(args, &walk(&1, ctx)) ++ [guard]}
  end

  defp walk({op, meta, [left, right]}, ctx) when op in [:==, :!=] do
    {op, meta, [comparable(walk(left, ctx)), comparable(walk(right, ctx))]}
  end

  defp walk({:doctest, _meta, [module | opts]}, _ctx) do
    quote do
      require NxSuite.DocTest
      NxSuite.DocTest.doctest(unquote(module), unquote(List.first(opts, [])))
    end
  end

  defp walk({:defmodule, meta, [name, [do: body]]}, ctx) do
    tag = quote(do: NxSuite.Exclusions.module_tag(__MODULE__, unquote(ctx.key)))
    {:defmodule, meta, [name, [do: {:__block__, [], [tag, walk(body, ctx)]}]]}
  end

  defp walk({:describe, meta, [name, [do: body]]}, ctx) when is_binary(name) do
    {:describe, meta, [name, [do: walk(body, %{ctx | describe: name})]]}
  end

  defp walk({:test, meta, [name | rest]}, ctx) do
    full = if ctx.describe, do: quote(do: unquote(ctx.describe) <> " " <> unquote(name)), else: name
    tag = quote(do: NxSuite.Exclusions.test_tag(__MODULE__, unquote(ctx.key), unquote(full)))
    {:__block__, [], [tag, {:test, meta, [name | Enum.map(rest, &walk(&1, ctx))]}]}
  end

  defp walk({form, meta, args}, ctx) when is_list(args),
    do: {walk(form, ctx), meta, Enum.map(args, &walk(&1, ctx))}

  defp walk({left, right}, ctx), do: {walk(left, ctx), walk(right, ctx)}
  defp walk(list, ctx) when is_list(list), do: Enum.map(list, &walk(&1, ctx))
  defp walk(other, _ctx), do: other

  defp comparable(ast), do: quote(do: NxSuite.Compare.comparable(unquote(ast)))
end

defmodule NxSuite.Report do
  @moduledoc false
  # An ExUnit formatter: collects every finished test by file and, when the
  # suite finishes, prints a table of tests / passed / failed / excluded per
  # file, the exclusions with their reasons, and (with `failures: true`)
  # each failure's first lines. With `trace: true` it prints each test's
  # name as it starts (to find one that hangs).
  #
  # It is also the per-file time limit (`timeout`, seconds): a test stuck
  # inside a NIF cannot be interrupted by ExUnit's own timeout (nor by
  # SIGTERM), so a test module (a file of the suite) that has run longer
  # than that ends the run: the tests running then are named, the table
  # of what finished is printed, and the VM halts with status 2.
  use GenServer

  @tick 5_000

  def init(opts) do
    opts = Keyword.fetch!(opts, :nx_suite)
    if opts[:timeout], do: Process.send_after(self(), :tick, @tick)
    {:ok, %{opts: opts, tests: [], modules: %{}, running: %{}}}
  end

  def handle_cast({:module_started, %ExUnit.TestModule{name: name, file: file}}, state) do
    {:noreply, put_in(state.modules[name], {file, System.monotonic_time(:second)})}
  end

  def handle_cast({:module_finished, %ExUnit.TestModule{name: name}}, state) do
    {:noreply, %{state | modules: Map.delete(state.modules, name)}}
  end

  def handle_cast({:test_started, %ExUnit.Test{} = test}, state) do
    if state.opts[:trace], do: IO.puts("  running #{test_name(test, state.opts)}")
    {:noreply, put_in(state.running[{test.module, test.name}], test)}
  end

  def handle_cast({:test_finished, %ExUnit.Test{} = test}, state) do
    running = Map.delete(state.running, {test.module, test.name})
    {:noreply, %{state | tests: [test | state.tests], running: running}}
  end

  def handle_cast({:suite_finished, _times}, state) do
    print(Enum.reverse(state.tests), state.opts)
    {:noreply, state}
  end

  def handle_cast(_event, state), do: {:noreply, state}

  def handle_info(:tick, state) do
    now = System.monotonic_time(:second)
    limit = state.opts[:timeout]
    over = for {_name, {file, start}} <- state.modules, now - start > limit, do: file

    if over != [] do
      root = Keyword.fetch!(state.opts, :root)
      files = Enum.map_join(Enum.uniq(over), ", ", &Path.relative_to(&1, root))
      IO.puts("\ntime limit: #{files} ran longer than #{limit} s; running now:")
      for test <- Map.values(state.running), do: IO.puts("  #{test_name(test, state.opts)}")
      print(Enum.reverse(state.tests), state.opts)
      System.halt(2)
    end

    Process.send_after(self(), :tick, @tick)
    {:noreply, state}
  end

  defp test_name(test, opts),
    do: "#{Path.relative_to(test.tags.file, Keyword.fetch!(opts, :root))}:#{test.tags.line} #{test.name}"

  defp outcome(%{state: nil}), do: :passed
  defp outcome(%{state: {:failed, _}}), do: :failed
  defp outcome(%{state: {:invalid, _}}), do: :failed
  defp outcome(%{state: {kind, _}}) when kind in [:skipped, :excluded], do: :excluded

  defp print(tests, opts) do
    root = Keyword.fetch!(opts, :root)
    by_file = Enum.group_by(tests, &Path.relative_to(&1.tags.file, root))
    files = Enum.map(Keyword.fetch!(opts, :files), &Path.relative_to(&1, root))

    IO.puts("\n## #{opts[:title]}\n")
    IO.puts("| file | tests | passed | failed | excluded |")
    IO.puts("| --- | ---: | ---: | ---: | ---: |")

    rows =
      for file <- files do
        file_tests = Map.get(by_file, file, [])
        counts = Enum.frequencies_by(file_tests, &outcome/1)
        row = [length(file_tests) | Enum.map([:passed, :failed, :excluded], &(counts[&1] || 0))]
        IO.puts("| #{file} | #{Enum.join(row, " | ")} |")
        row
      end

    [total, passed, failed, excluded] = Enum.zip_with([[0, 0, 0, 0] | rows], &Enum.sum/1)
    IO.puts("| **total** | #{total} | #{passed} | #{failed} | #{excluded} |")

    # The target is stated over the tests that are not about the reference
    # implementation's internals (category :internals).
    relevant = total - Enum.count(tests, &(category(&1) == :internals))
    rate = if relevant > 0, do: Float.round(100 * passed / relevant, 1), else: 0.0
    IO.puts("\npassed #{passed} of the #{relevant} tests not about Nx's internals (#{rate}%)")

    print_exclusions(tests)
    if opts[:failures], do: print_failures(tests, root)
  end

  defp category(%{state: {:skipped, text}}), do: NxSuite.Exclusions.category(text)
  defp category(_), do: nil

  defp print_exclusions(tests) do
    # Skipped: test/nx_suite/exclusions.exs; excluded: a filter (:distributed,
    # Axon's :integration).
    skipped = for %{state: {kind, reason}} = t <- tests, kind in [:skipped, :excluded], do: {t, reason}

    if skipped != [] do
      IO.puts("\n### Excluded\n")

      skipped
      |> Enum.group_by(fn {t, reason} -> {Path.basename(t.tags.file), reason} end, fn {t, _} -> t end)
      |> Enum.sort()
      |> Enum.each(fn {{file, reason}, ts} ->
        IO.puts("* #{file} (#{length(ts)}): #{reason}")
      end)
    end
  end

  defp print_failures(tests, root) do
    for %{state: {kind, failures}} = t <- tests, kind in [:failed, :invalid] do
      IO.puts("\n#{Path.relative_to(t.tags.file, root)}:#{t.tags.line} #{t.name}")

      for {kind, reason, stack} <- failures(failures) do
        Exception.format_banner(kind, reason, stack)
        |> String.split("\n", trim: true)
        |> Enum.take(40)
        |> Enum.each(&IO.puts("    " <> String.slice(&1, 0, 200)))
      end
    end
  end

  # An :invalid test carries its module: its setup_all failed.
  defp failures(list) when is_list(list), do: list
  defp failures(_module), do: [{:error, RuntimeError.exception("setup_all failed"), []}]
end

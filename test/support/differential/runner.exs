defmodule EmilyTest.Differential do
  @moduledoc false
  # Runs generated calls on Nx.BinaryBackend and Emily.Backend and compares
  # them. Call `i` of seed `s` is drawn from :rand seeded with {s, i}: it
  # is replayed alone with EMILY_DIFF_SEED=s EMILY_DIFF_ONLY=i.

  alias EmilyTest.Differential.{Cases, Compare}

  @doc "The names of the functions the catalogue covers."
  def functions, do: Enum.map(Cases.all(), &elem(&1, 0))

  @doc "Runs the calls `indices` of `seed`; returns `{failures, counts}`."
  def run(seed, indices, skip? \\ fn _ -> false end) do
    Enum.reduce(indices, {[], %{}}, fn index, {failures, counts} ->
      c = draw(seed, index)
      counts = Map.update(counts, c.name, 1, &(&1 + 1))

      case if(c.fun, do: verdict(c), else: {:error, c.opts[:error]}) do
        :ok ->
          {failures, counts}

        {:error, reason} ->
          if skip?.(c),
            do: {failures, counts},
            else: {[failure(seed, index, c, reason) | failures], counts}
      end
    end)
    |> then(fn {f, counts} -> {Enum.reverse(f), counts} end)
  end

  @doc "The call `index` of `seed`."
  def draw(seed, index) do
    :rand.seed(:exsss, {seed, index, 0x5EED})
    catalogue = Cases.all()
    total = catalogue |> Enum.map(&elem(&1, 1)) |> Enum.sum()
    {name, _weight, gen} = weighted(:rand.uniform(total), catalogue)

    # A generator that raises is a bug of this test: reported as a failure.
    case attempt(gen) do
      {:ok, call} ->
        call

      {:raised, mod, msg} ->
        Cases.call(name, [], nil, opts: [error: "the generator raised #{inspect(mod)}: #{msg}"])
    end
  end

  defp weighted(n, [{_, w, _} = entry | rest]),
    do: if(n <= w, do: entry, else: weighted(n - w, rest))

  # EMILY_TEST_DEVICE=gpu runs Emily's side on the GPU: the same calls then
  # check the CUDA backend against Nx.BinaryBackend.
  defp emily_backend do
    case System.get_env("EMILY_TEST_DEVICE", "cpu") do
      "cpu" -> {Emily.Backend, device: :cpu}
      "gpu" -> {Emily.Backend, device: :gpu}
    end
  end

  @doc "`:ok` or `{:error, reason}` for one call."
  def verdict(c) do
    bin_args = Enum.map(c.args, &arg(&1, Nx.BinaryBackend))
    emily_args = Enum.map(c.args, &arg(&1, emily_backend()))
    expected = attempt(fn -> (c.ref || c.fun).(bin_args) end)
    got = attempt(fn -> c.fun.(emily_args) |> to_binary_backend() end)

    case {expected, got} do
      {{:raised, same, _}, {:raised, same, _}} ->
        :ok

      {{:raised, mod, msg}, _} ->
        {:error, "BinaryBackend raised #{inspect(mod)}: #{msg}\n  Emily gave: #{show(got)}"}

      {_, {:raised, mod, msg}} ->
        {:error, "Emily raised #{inspect(mod)}: #{msg}\n  BinaryBackend gave: #{show(expected)}"}

      {{:ok, _}, {:ok, result}} when c.check != nil ->
        checked(fn -> c.check.(bin_args, result) end, result)

      {{:ok, exp}, {:ok, result}} ->
        checked(fn -> Compare.compare(exp, result, c.mode, c.scale, c.eps_of) end, result)
    end
  end

  # A comparison that raises (say a malformed BinaryBackend tensor) is a
  # failure to look at, not a crash of the whole run.
  defp checked(fun, result) do
    case attempt(fun) do
      {:ok, verdict} ->
        verdict

      {:raised, mod, msg} ->
        {:error, "the comparison raised #{inspect(mod)}: #{msg}\n  Emily gave: #{show(result)}"}
    end
  end

  defp arg(:backend, backend), do: backend
  defp arg(%Nx.Tensor{} = t, Nx.BinaryBackend), do: t
  defp arg(%Nx.Tensor{} = t, backend), do: Nx.backend_copy(t, backend)
  defp arg(other, _backend), do: other

  defp attempt(fun) do
    {:ok, fun.()}
  rescue
    e -> {:raised, e.__struct__, Exception.message(e) |> String.slice(0, 300)}
  end

  defp to_binary_backend(%Nx.Tensor{} = t), do: Nx.backend_transfer(t, Nx.BinaryBackend)

  defp to_binary_backend(tuple) when is_tuple(tuple),
    do: tuple |> Tuple.to_list() |> Enum.map(&to_binary_backend/1) |> List.to_tuple()

  defp to_binary_backend(list) when is_list(list), do: Enum.map(list, &to_binary_backend/1)
  defp to_binary_backend(other), do: other

  # One line per input: type, shape, names and the flat values.
  def show(%Nx.Tensor{} = t) do
    names = if Enum.all?(t.names, &is_nil/1), do: "", else: " names: #{inspect(t.names)}"

    "#{Nx.Type.to_string(t.type)}#{inspect(t.shape)}#{names} #{inspect(Nx.to_flat_list(t), limit: 64)}"
  end

  def show({:ok, result}), do: show(result)

  def show(tuple) when is_tuple(tuple),
    do: tuple |> Tuple.to_list() |> Enum.map_join(", ", &show/1)

  def show(other), do: inspect(other)

  defp failure(seed, index, c, reason) do
    inputs = c.args |> Enum.map(&show/1) |> Enum.join("\n    ")

    """
    #{c.name} (call #{index} of seed #{seed}; replay: EMILY_DIFF_SEED=#{seed} EMILY_DIFF_ONLY=#{index})
      options: #{inspect(c.opts)}
      inputs:
        #{inputs}
      #{reason}
    """
  end
end

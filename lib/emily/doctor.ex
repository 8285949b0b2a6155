defmodule Mix.Tasks.Emily.Doctor do
  @shortdoc "Checks that Emily's native engine is built, loads and computes"

  @moduledoc """
  Checks the installation and prints one `ok`, `warn` or `error` line per
  check:

      mix emily.doctor

    * platform: OS, CPU architecture, OTP and Elixir versions, schedulers;
    * the NIF: `priv/emily_nif.so` is built and loaded;
    * the engine build: compiler, CPU vector features the kernels use,
      thread pool size, whether it is an AddressSanitizer build;
    * BLAS: the OpenBLAS kernel set chosen for this CPU and its threads;
    * CUDA: whether the backend is compiled in and a GPU is visible
      (a warning when not: Emily then computes on the CPU);
    * a smoke test on each available device: a small matrix product, an
      elementwise chain and a reduction checked against known values, on a
      new stream and on the default stream.

  Exits with a non-zero status when a check fails.
  """

  use Mix.Task

  alias Emily.Native

  @impl Mix.Task
  def run(_args) do
    Mix.Task.run("app.start")
    results = checks()

    Enum.each(results, fn {status, name, text} ->
      Mix.shell().info(String.pad_trailing("#{status}:", 7) <> "#{name}: #{text}")
    end)

    errors = Enum.count(results, &(elem(&1, 0) == :error))
    warns = Enum.count(results, &(elem(&1, 0) == :warn))
    Mix.shell().info("emily.doctor: #{length(results)} checks, #{errors} errors, #{warns} warnings")

    if errors > 0, do: Mix.raise("emily.doctor: #{errors} check(s) failed")
    :ok
  end

  @doc """
  Runs every check and returns `[{:ok | :warn | :error, name, text}]`
  without printing.
  """
  @spec checks() :: [{:ok | :warn | :error, String.t(), String.t()}]
  def checks do
    nif = check_nif()
    loaded? = match?({:ok, _, _}, nif)

    [platform(), nif_file(), nif] ++
      if loaded? do
        info = Native.build_info()
        [engine(info), blas(info), cuda(info), smoke_cpu()]
      else
        [{:error, "smoke test", "skipped: the NIF is not loaded"}]
      end
  end

  defp platform do
    {family, name} = :os.type()
    arch = :erlang.system_info(:system_architecture) |> to_string()

    text =
      "#{family}/#{name} #{arch}, OTP #{System.otp_release()}, Elixir #{System.version()}, " <>
        "#{System.schedulers_online()} schedulers, " <>
        "#{:erlang.system_info(:dirty_cpu_schedulers_online)} dirty CPU schedulers"

    cond do
      family != :unix ->
        {:warn, "platform", text <> " (only Linux is tested)"}

      not String.contains?(arch, "x86_64") ->
        {:warn, "platform", text <> " (only x86-64 is tested)"}

      true ->
        {:ok, "platform", text}
    end
  end

  defp nif_file do
    path = Path.join(to_string(:code.priv_dir(:emily)), "emily_nif.so")

    case File.stat(path) do
      {:ok, %{size: size}} -> {:ok, "NIF built", "#{path} (#{div(size, 1024)} KiB)"}
      {:error, reason} -> {:error, "NIF built", "#{path}: #{reason} (run `mix compile`)"}
    end
  end

  defp check_nif do
    case :persistent_term.get({Native, :load_error}, nil) do
      nil ->
        try do
          _ = Native.build_info()
          {:ok, "NIF loaded", "Emily.Native answers"}
        rescue
          e -> {:error, "NIF loaded", Exception.message(e)}
        end

      message ->
        {:error, "NIF loaded", message}
    end
  end

  defp engine(info) do
    text =
      "#{info.compiler}, CPU features [#{info.cpu_features}], SIMD clone #{info.simd}, " <>
        "#{info.engine_threads} engine threads" <>
        if(info.sanitized, do: ", AddressSanitizer build", else: "")

    cond do
      info.sanitized -> {:warn, "engine", text <> " (slow; for testing only)"}
      info.simd == "baseline (forced)" -> {:warn, "engine", text <> " (SIMD=baseline build; for testing only)"}
      info.cpu_features == "" -> {:warn, "engine", text <> " (no AVX2: scalar kernels)"}
      true -> {:ok, "engine", text}
    end
  end

  defp blas(info) do
    text = "#{String.trim(info.blas_config)}, core #{info.blas_core}, " <>
             "#{info.blas_threads} threads"

    cond do
      info.blas_core == "" -> {:warn, "BLAS", text <> " (kernel set unknown)"}
      info.blas_threads < 1 -> {:error, "BLAS", text}
      true -> {:ok, "BLAS", text}
    end
  end

  defp cuda(info) do
    gpu =
      cond do
        File.exists?("/dev/nvidia0") -> "an NVIDIA GPU is present (/dev/nvidia0)"
        true -> "no GPU visible"
      end

    if info.cuda do
      {:ok, "CUDA", "built; #{gpu}"}
    else
      {:warn, "CUDA", "not built; #{gpu}; computing on the CPU"}
    end
  end

  # A known answer on a fresh stream and on the default stream.
  defp smoke_cpu do
    try do
      stream = Emily.Stream.new(:cpu)

      try do
        on_new = Emily.Stream.with_stream(stream, &smoke_values/0)
        on_default = smoke_values()
        expected = expected_smoke()

        if on_new == expected and on_default == expected do
          {:ok, "smoke test (cpu)", "matmul, exp/add chain and sum agree with known values"}
        else
          {:error, "smoke test (cpu)",
           "wrong results: #{inspect(on_new)} / #{inspect(on_default)}, expected #{inspect(expected)}"}
        end
      after
        Emily.Stream.close(stream)
      end
    rescue
      e -> {:error, "smoke test (cpu)", Exception.message(e)}
    end
  end

  # [[1,2],[3,4]] . [[5,6],[7,8]] = [[19,22],[43,50]]; sum(x + 0*exp(x)) = 10.
  defp smoke_values do
    a = Emily.from_binary(f64s([1, 2, 3, 4]), [2, 2], {:f, 64})
    b = Emily.from_binary(f64s([5, 6, 7, 8]), [2, 2], {:f, 64})
    product = Native.matmul(a, b)
    zero = Native.scalar_f64(0.0, {:f, 64})
    chain = Native.add(a, Native.multiply(zero, Native.exp(a)))
    total = Native.sum(chain, nil, false)
    {read_f64s(product), read_f64s(total)}
  end

  defp expected_smoke, do: {[19.0, 22.0, 43.0, 50.0], [10.0]}

  defp f64s(values), do: for(v <- values, into: <<>>, do: <<v * 1.0::float-64-native>>)

  defp read_f64s(t), do: for(<<v::float-64-native <- Emily.to_binary(t)>>, do: v)
end

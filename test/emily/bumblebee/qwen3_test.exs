defmodule Emily.Bumblebee.Qwen3Test.Support do
  # Bumblebee's Qwen3 on Emily against Hugging Face transformers: tiny
  # random Qwen3ForCausalLM models (test/fixtures/qwen3_tiny, tied
  # embeddings, 3 layers; test/fixtures/qwen3_tiny_untied, a separate
  # lm_head, 2 layers) and transformers' greedy generations of 32 tokens
  # from 3 prompts with their logits, written by scripts/qwen3_golden.py.
  #
  # Three checks per model, graph and device:
  #   * Bumblebee.Text.Generation.build_generate/3 (what Bumblebee's
  #     generation serving runs: prefill, then one token at a time with the
  #     KV cache, in one while loop) jitted with Emily.Compiler gives
  #     transformers' 32 token ids;
  #   * the same steps driven from here (the model's predict with its
  #     cache, one Emily.Compiler program for the prefill and one for a
  #     decoding step) give transformers' logits at every step within
  #     @tolerance of the step's largest logit;
  #   * build_generate on the 3 prompts as one left-padded batch gives the
  #     same ids (the attention mask and the positions of padded rows).
  @moduledoc false
  import ExUnit.Assertions

  @fixtures Path.expand("../../fixtures", __DIR__)
  @new_tokens 32
  # The golden logits are float32 from PyTorch; the two computations differ
  # in summation order only (errors measured: a few 1e-7 of the largest
  # logit). The smallest greedy margin in the golden runs is above 1e-3, so
  # no step is a near-tie at this tolerance.
  @tolerance 1.0e-4
  # The cache is sized for the longest prompt plus the new tokens, for every
  # prompt, so that the decoding step is one program for all of them.
  @cache_length 64

  def fixture(name), do: Path.join(@fixtures, name)

  def load(name, device, graph) do
    dir = fixture(name)
    backend = {Emily.Backend, device: device}
    {:ok, %{model: model} = model_info} = Bumblebee.load_model({:local, dir}, backend: backend)
    model = if graph == :fast, do: fast_kernels(model, model_info.spec), else: model

    %{"cases" => cases} = Path.join(dir, "golden.json") |> File.read!() |> Jason.decode!()
    logits = Safetensors.read!(Path.join(dir, "golden_logits.safetensors"))

    cases =
      cases
      |> Enum.with_index()
      |> Enum.map(fn {c, i} -> Map.put(c, "logits", logits["case_#{i}"]) end)

    %{model_info: %{model_info | model: model}, cases: cases, device: device}
  end

  # Every RMS norm on Emily.Fast: per block the two around attention and
  # the query and key norms, and the final norm.
  defp fast_kernels(model, spec) do
    fast = Emily.Bumblebee.FastKernels.apply(model)

    modules =
      Axon.reduce_nodes(fast, [], fn
        %{op_name: :rms_norm, op: op}, acc -> [Function.info(op, :module) | acc]
        _, acc -> acc
      end)

    assert modules ==
             List.duplicate({:module, Emily.Bumblebee.FastKernels}, 4 * spec.num_blocks + 1),
           "RMS norms after FastKernels: #{inspect(modules)}"

    fast
  end

  # Bumblebee's generation, greedy, no end-of-sequence token: the new ids.
  def generate(ctx, cases) do
    jitted = generate_fun(ctx)
    params = ctx.model_info.params

    for %{"prompt_ids" => prompt} <- cases do
      inputs = %{
        "input_ids" => Nx.tensor([prompt]),
        "attention_mask" => Nx.broadcast(1, {1, length(prompt)}),
        "seed" => Nx.tensor([0])
      }

      %{token_ids: ids} = jitted.(params, inputs)
      ids |> Nx.to_flat_list() |> Enum.take(@new_tokens)
    end
  end

  # A batch of the prompts, left-padded with 0 to the longest (padding
  # masked out; positions count from each prompt's first token): each row's
  # new ids.
  def generate_batched(ctx, cases) do
    prompts = Enum.map(cases, & &1["prompt_ids"])
    width = prompts |> Enum.map(&length/1) |> Enum.max()
    pad = fn row, value -> List.duplicate(value, width - length(row)) end

    inputs = %{
      "input_ids" => Nx.tensor(Enum.map(prompts, &(pad.(&1, 0) ++ &1))),
      "attention_mask" =>
        Nx.tensor(Enum.map(prompts, &(pad.(&1, 0) ++ List.duplicate(1, length(&1))))),
      "seed" => Nx.broadcast(0, {length(prompts)})
    }

    %{token_ids: ids} = generate_fun(ctx).(ctx.model_info.params, inputs)
    ids |> Nx.to_list() |> Enum.map(&Enum.take(&1, @new_tokens))
  end

  defp generate_fun(%{model_info: %{model: model, spec: spec}, device: device}) do
    config =
      Bumblebee.configure(Bumblebee.Text.GenerationConfig,
        max_new_tokens: @new_tokens,
        pad_token_id: 0
      )

    generate = Bumblebee.Text.Generation.build_generate(model, spec, config)
    Nx.Defn.jit(generate, compiler: Emily.Compiler, device: device)
  end

  # Greedy decoding with the model's cache, as build_generate does it: the
  # logits of each step ({@new_tokens, vocab}) and the ids chosen from them.
  def step_logits(
        %{model_info: %{model: model, params: params, spec: spec}, device: device},
        cases
      ) do
    {_, predict} = Axon.build(model)
    predict = Nx.Defn.jit(predict, compiler: Emily.Compiler, device: device)

    for %{"prompt_ids" => prompt} <- cases do
      n = length(prompt)

      inputs = %{
        "input_ids" => Nx.tensor([prompt]),
        "attention_mask" => Nx.broadcast(1, {1, n}),
        "position_ids" => Nx.iota({1, n})
      }

      cache = Bumblebee.Text.Generation.init_cache(spec, 1, @cache_length, inputs)

      {steps, _} =
        Enum.map_reduce(0..(@new_tokens - 1), {inputs, cache}, fn step, {inputs, cache} ->
          out = predict.(params, Map.put(inputs, "cache", cache))
          logits = out.logits[[0, -1]] |> Nx.backend_copy(Nx.BinaryBackend)
          token = logits |> Nx.argmax() |> Nx.to_number()

          next = %{
            "input_ids" => Nx.tensor([[token]]),
            "attention_mask" => Nx.tensor([[1]]),
            "position_ids" => Nx.tensor([[n + step]])
          }

          {{logits, token}, {next, out.cache}}
        end)

      {logits, ids} = Enum.unzip(steps)
      {Nx.stack(logits), ids}
    end
  end

  # The largest over a case's steps of a step's largest |got - want|
  # relative to that step's largest |want|.
  def rel_error(got, want) do
    [got, want] =
      Enum.map([got, want], &(&1 |> Nx.backend_copy(Nx.BinaryBackend) |> Nx.as_type(:f64)))

    err = Nx.subtract(got, want) |> Nx.abs() |> Nx.reduce_max(axes: [1])
    scale = want |> Nx.abs() |> Nx.reduce_max(axes: [1])
    err |> Nx.divide(scale) |> Nx.reduce_max() |> Nx.to_number()
  end

  def tolerance, do: @tolerance

  # Both checks on one model and graph, with messages naming the case.
  def check(name, device, graph) do
    ctx = load(name, device, graph)
    want_ids = Enum.map(ctx.cases, & &1["generated_ids"])

    generated = generate(ctx, ctx.cases)

    for {{got, want}, i} <- Enum.with_index(Enum.zip(generated, want_ids)) do
      assert got == want,
             "#{name} (#{graph}, #{device}) prompt #{i}: generated #{inspect(got)}, " <>
               "transformers #{inspect(want)}"
    end

    errors =
      for {{logits, ids}, %{"logits" => want_logits, "generated_ids" => want}} <-
            Enum.zip(step_logits(ctx, ctx.cases), ctx.cases) do
        assert ids == want, "#{name}: stepped ids #{inspect(ids)} vs #{inspect(want)}"

        rel_error(logits, want_logits)
      end

    # The batched run with padding: the same ids as one prompt at a time.
    assert generate_batched(ctx, ctx.cases) == want_ids,
           "#{name} (#{graph}, #{device}): the left-padded batch generates other ids"

    if System.get_env("EMILY_PRINT_ERRORS"),
      do: IO.puts("qwen3 #{name} #{graph} #{device}: logits rel. errors #{inspect(errors)}")

    errors
  end
end

defmodule Emily.Bumblebee.Qwen3Test do
  use ExUnit.Case, async: false

  alias Emily.Bumblebee.Qwen3Test.Support

  @moduletag :bumblebee
  @moduletag timeout: 300_000

  for name <- ["qwen3_tiny", "qwen3_tiny_untied"], graph <- [:stock, :fast] do
    @tag graph: graph
    test "#{name}, #{graph} graph: transformers' 32 greedy ids and logits (CPU)" do
      errors = Support.check(unquote(name), :cpu, unquote(graph))

      assert Enum.all?(errors, &(&1 < Support.tolerance())),
             "logits rel. errors #{inspect(errors)}"
    end
  end
end

defmodule Emily.Bumblebee.Qwen3GPUTest do
  # The same on the GPU (params and programs on device: :gpu). Skipped, with
  # the reason, where no GPU is usable (CI).
  use ExUnit.Case, async: false

  alias Emily.Bumblebee.Qwen3Test.Support

  @moduletag :bumblebee
  @moduletag :gpu
  @moduletag timeout: 300_000

  case Emily.Device.available(:gpu) do
    :ok ->
      :ok

    {:error, reason} ->
      IO.puts("Emily.Bumblebee.Qwen3GPUTest skipped: #{reason}")
      @moduletag skip: "no usable GPU: #{reason}"
  end

  for name <- ["qwen3_tiny", "qwen3_tiny_untied"], graph <- [:stock, :fast] do
    test "#{name}, #{graph} graph: transformers' 32 greedy ids and logits (GPU)" do
      errors = Support.check(unquote(name), :gpu, unquote(graph))

      assert Enum.all?(errors, &(&1 < Support.tolerance())),
             "logits rel. errors #{inspect(errors)}"
    end
  end
end

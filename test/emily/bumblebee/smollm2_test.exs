defmodule Emily.Bumblebee.SmolLM2Test do
  # SmolLM2-135M-Instruct from its Q4_1 GGUF file through Bumblebee on Emily
  # (Emily.Bumblebee.GGUF: spec, quantized weights, tokenizer from the
  # metadata) against llama.cpp on the same file (golden/smollm2.json,
  # written by scripts/smollm2_golden.py): the prompt's token ids are equal,
  # and the 64 greedy tokens are equal up to the first step where llama.cpp's
  # two best logits are closer than @near_tie (llama.cpp rounds activations
  # to 8 bits before its quantized products; Emily multiplies in f32, so a
  # near-tie may go the other way, after which the texts differ). The model
  # comes from its PyPI package (scripts/fetch_models.sh, run by setup).
  use ExUnit.Case, async: false

  @moduletag :bumblebee
  @moduletag timeout: 300_000
  @golden Path.expand("golden/smollm2.json", __DIR__)
  @path Path.join([
          System.get_env("EMILY_MODELS") || Path.expand("~/.cache/emily/models"),
          "smollm2",
          "SmolLM2-135M-Instruct.Q4_1.gguf"
        ])
  # Logit margins below this count as near-ties (llama.cpp's q8_1
  # activations move logits by up to a few tenths here).
  @near_tie 0.5

  # EMILY_TEST_DEVICE=gpu runs the same checks on the GPU (the device
  # machine's runs): the model loads and computes on the default backend.
  @device if System.get_env("EMILY_TEST_DEVICE") == "gpu", do: :gpu, else: :cpu

  unless File.exists?(@path) do
    @moduletag skip: "SmolLM2 is not installed: run scripts/fetch_models.sh"
  end

  setup_all do
    if @device == :gpu, do: Nx.global_default_backend({Emily.Backend, device: :gpu})
    %{"cases" => cases} = @golden |> File.read!() |> Jason.decode!()
    {:ok, model_info} = Emily.Bumblebee.GGUF.load_model(@path)
    {:ok, tokenizer} = Emily.Bumblebee.GGUF.load_tokenizer(@path)
    %{cases: cases, model_info: model_info, tokenizer: tokenizer}
  end

  test "the tokenizer built from the GGUF metadata gives llama.cpp's prompt ids", ctx do
    for %{"prompt" => prompt, "prompt_ids" => ids} <- ctx.cases do
      assert Nx.to_flat_list(Bumblebee.apply_tokenizer(ctx.tokenizer, prompt)["input_ids"]) == ids
    end
  end

  test "greedy generation follows llama.cpp up to its first near-tie", ctx do
    {:ok, config} =
      Emily.Bumblebee.GGUF.load_generation_config(@path, max_new_tokens: 64, eos_token_id: nil)

    # The token ids, not the text: a callback hook would stream text; the
    # serving's output is text, so run the model's generate function.
    %{model: model, params: params, spec: spec} = ctx.model_info
    generate = Bumblebee.Text.Generation.build_generate(model, spec, config)
    jitted = Nx.Defn.jit(generate, compiler: Emily.Compiler)

    agreed =
      for %{"prompt_ids" => prompt_ids, "generated_ids" => want, "margins" => margins} <-
            ctx.cases do
        n = length(prompt_ids)

        inputs = %{
          "input_ids" => Nx.tensor([prompt_ids]),
          "attention_mask" => Nx.broadcast(1, {1, n}),
          "seed" => Nx.tensor([0])
        }

        %{token_ids: got} = jitted.(params, inputs)
        got = got |> Nx.to_flat_list() |> Enum.take(64)
        first_diff = Enum.zip(got, want) |> Enum.find_index(fn {a, b} -> a != b end)

        if first_diff do
          margin = Enum.at(margins, first_diff)

          assert margin < @near_tie,
                 "token #{first_diff} differs (#{Enum.at(got, first_diff)} vs llama.cpp's " <>
                   "#{Enum.at(want, first_diff)}) where llama.cpp's margin is #{margin}"
        end

        first_diff || 64
      end

    if System.get_env("EMILY_PRINT_ERRORS"),
      do: IO.puts("tokens equal to llama.cpp's: #{inspect(agreed)}")
  end

  test "streaming: the decode loop stays one program, and the streamed text is the whole text",
       ctx do
    {:ok, config} =
      Emily.Bumblebee.GGUF.load_generation_config(@path, max_new_tokens: 12, eos_token_id: nil)

    [%{"prompt" => prompt} | _] = ctx.cases

    serving = fn stream ->
      Bumblebee.Text.generation(ctx.model_info, ctx.tokenizer, config,
        compile: [batch_size: 1, sequence_length: 64],
        defn_options: [compiler: Emily.Compiler],
        stream: stream
      )
    end

    parent = self()
    handler = "smollm2-stream-#{inspect(parent)}"

    :telemetry.attach(
      handler,
      [:emily, :defn, :compile],
      fn _, _, meta, _ -> send(parent, {:compiled, meta}) end,
      nil
    )

    try do
      %{results: [%{text: text}]} = Nx.Serving.run(serving.(false), prompt)
      chunks = serving.(true) |> Nx.Serving.run(prompt) |> Enum.to_list()

      assert length(chunks) > 1
      assert Enum.join(chunks) == text

      # Both generation functions compiled to programs: the loop never fell
      # back to the Evaluator. Without streaming the token hook has no
      # override and is dropped; with it, it is called after the first
      # step and from each iteration of the loop.
      modes = collect_compiles([])
      assert Enum.all?(modes, &(&1.mode == :program))
      assert modes |> Enum.map(& &1.hooks) |> Enum.sort() == [0, 2]
    after
      :telemetry.detach(handler)
    end
  end

  defp collect_compiles(acc) do
    receive do
      {:compiled, meta} -> collect_compiles([meta | acc])
    after
      0 -> acc
    end
  end
end

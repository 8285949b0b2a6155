# SmolLM2-135M-Instruct (Q4_1 GGUF) through Bumblebee's generation serving
# on Emily (Emily.Bumblebee.GGUF, Emily.Compiler), greedy, batch 1: prompt
# processing (one new token) and decoding (64 new tokens: no end-of-sequence
# token, so every run generates them all), median of 5 after a warm-up. The llama.cpp counterpart on
# the same file is bench/smollm2_llama_cpp.py; with --gpu (weights and the
# compiled decode on the GPU), PyTorch on the dequantized weights is
# bench/smollm2_torch.py.
#
#   mix run bench/smollm2_bench.exs [--gpu] [--stock] [--norms-only]

Code.require_file("../examples/support/models.exs", __DIR__)

{flags, _, _} =
  OptionParser.parse(System.argv(),
    strict: [gpu: :boolean, stock: :boolean, norms_only: :boolean]
  )

device = if flags[:gpu], do: :gpu, else: :cpu
Nx.global_default_backend({Emily.Backend, device: device})
path = Path.join(Examples.Models.dir!("smollm2"), "SmolLM2-135M-Instruct.Q4_1.gguf")
{:ok, model_info} = Emily.Bumblebee.GGUF.load_model(path)

# --gpu: the weights move to the GPU once (the file's tensors are read on
# the CPU; the quantized matrices stay ggml blocks and run through the GPU's
# matrix-vector kernels), so that no step copies them.
model_info =
  if device == :gpu do
    params = model_info.params
    on_gpu = Nx.backend_copy(params.data, {Emily.Backend, device: :gpu})
    %{model_info | params: %{params | data: on_gpu}}
  else
    model_info
  end

# As the demo runs it (Emily.Bumblebee.FastKernels: RMS norms, rotary
# embeddings and attention); --norms-only: the norms alone; --stock:
# Bumblebee's graph.
kernels =
  if flags[:norms_only],
    do: [:norms],
    else: [:norms, :rotary_embedding, :attention]

model_info =
  if flags[:stock],
    do: model_info,
    else: %{
      model_info
      | model: Emily.Bumblebee.FastKernels.apply(model_info.model, only: kernels)
    }

graph = if flags[:stock], do: "stock graph", else: "FastKernels #{inspect(kernels)}"
{:ok, tokenizer} = Emily.Bumblebee.GGUF.load_tokenizer(path)

# About 100 prompt tokens.
prompt =
  "<|im_start|>user\n" <>
    String.duplicate("Tensors are arrays of numbers with a shape and a type. ", 8) <>
    "Summarise this.<|im_end|>\n<|im_start|>assistant\n"

prompt_tokens = Bumblebee.apply_tokenizer(tokenizer, prompt)["input_ids"] |> Nx.size()

time = fn new_tokens ->
  {:ok, config} =
    Emily.Bumblebee.GGUF.load_generation_config(path,
      max_new_tokens: new_tokens,
      eos_token_id: nil
    )

  serving =
    Bumblebee.Text.generation(model_info, tokenizer, config,
      # Prompts are padded to the smallest bucket that holds them (128 here).
      compile: [batch_size: 1, sequence_length: [64, 128, 256]],
      defn_options: [compiler: Emily.Compiler]
    )

  Nx.Serving.run(serving, prompt)

  times =
    for _ <- 1..5 do
      {us, %{results: [%{token_summary: %{output: ^new_tokens}}]}} =
        :timer.tc(fn -> Nx.Serving.run(serving, prompt) end)

      us / 1000
    end

  times |> Enum.sort() |> Enum.at(2)
end

prefill_ms = time.(1)
total_ms = time.(65)
decode_tps = 64 / ((total_ms - prefill_ms) / 1000)

IO.puts(
  "Emily (#{device}, #{graph}): SmolLM2-135M Q4_1, #{prompt_tokens} prompt tokens: prompt + first token " <>
    "#{:erlang.float_to_binary(prefill_ms, decimals: 1)} ms " <>
    "(#{:erlang.float_to_binary(prompt_tokens / (prefill_ms / 1000), decimals: 0)} tok/s), " <>
    "decode #{:erlang.float_to_binary(decode_tps, decimals: 1)} tok/s"
)

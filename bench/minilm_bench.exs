# all-MiniLM-L6-v2 through Bumblebee's text_embedding serving on Emily
# (Emily.Backend parameters, Emily.Compiler), batch 16 x 128 tokens, CPU:
# ms per batch, median of 20 after 3 warm-ups. The onnxruntime counterpart
# is bench/minilm_ort.py (same batch, mean pooling and L2 norm).
#
# --gpu: batch 32 x 128 on the GPU (issue 16's figure), the tokenizer
# OUTSIDE the timed region: the texts are tokenized once, then each timed
# call runs the model (Emily.Compiler, fusion on; --graph: replayed as a
# CUDA graph), mean pooling and the L2 norm, and reads the (32, 384)
# embeddings back to the host. --bf16 / --f16 load the parameters in that
# type (the checkpoint is f32); the PyTorch counterpart is
# bench/minilm_torch.py (eager and torch.compile, same batch and types).
#
#   mix run bench/minilm_bench.exs [--gpu [--bf16 | --f16] [--graph]] [--stock]

Code.require_file("../examples/support/models.exs", __DIR__)

{flags, _, _} =
  OptionParser.parse(System.argv(),
    strict: [gpu: :boolean, stock: :boolean, bf16: :boolean, f16: :boolean, graph: :boolean]
  )

device = if flags[:gpu], do: :gpu, else: :cpu
Nx.global_default_backend({Emily.Backend, device: device})
dir = Examples.Models.dir!("all-minilm-l6-v2")

type =
  cond do
    flags[:bf16] -> :bf16
    flags[:f16] -> :f16
    true -> :f32
  end

{:ok, model} = Bumblebee.load_model({:local, dir}, type: type)
# As the demo runs it: layer norms and attention on Emily.Fast kernels
# (Emily.Bumblebee.FastKernels; --stock: Bumblebee's graph).
model =
  if flags[:stock],
    do: model,
    else: %{model | model: Emily.Bumblebee.FastKernels.apply(model.model)}

graph = if flags[:stock], do: "stock graph", else: "FastKernels"
{:ok, tokenizer} = Bumblebee.load_tokenizer({:local, dir})

words =
  ~w(the model embeds every sentence of this batch into a vector of three hundred eighty four numbers)

texts_of = fn n ->
  for i <- 1..n, do: Enum.map_join(0..127, " ", &Enum.at(words, rem(&1 + i, length(words))))
end

if flags[:gpu] do
  # Tokenized once, outside the timed region.
  batch = 32
  tokenizer = Bumblebee.configure(tokenizer, length: 128)
  inputs = Bumblebee.apply_tokenizer(tokenizer, texts_of.(batch))
  {_init, predict} = Axon.build(model.model, mode: :inference)

  embed =
    Nx.Defn.jit(
      fn params, inputs ->
        hidden = predict.(params, inputs).hidden_state
        mask = Nx.new_axis(inputs["attention_mask"], -1) |> Nx.as_type(Nx.type(hidden))
        pooled = Nx.divide(Nx.sum(Nx.multiply(hidden, mask), axes: [1]), Nx.sum(mask, axes: [1]))
        norm = Nx.sqrt(Nx.sum(Nx.multiply(pooled, pooled), axes: [1], keep_axes: true))
        Nx.divide(pooled, Nx.max(norm, 1.0e-12))
      end,
      compiler: Emily.Compiler,
      cuda_graph: flags[:graph] || false
    )

  # Reading the embeddings back waits for the GPU.
  run = fn -> embed.(model.params, inputs) |> Nx.to_binary() end
  for _ <- 1..5, do: run.()

  times =
    for _ <- 1..50 do
      {us, _} = :timer.tc(run)
      us / 1000
    end

  median = times |> Enum.sort() |> Enum.at(25)
  graph = if flags[:graph], do: graph <> ", CUDA graph", else: graph

  IO.puts(
    "Emily (gpu, #{type}, #{graph}): MiniLM #{batch} x 128 #{:erlang.float_to_binary(median, decimals: 2)} ms per batch (median of 50, tokenizer outside the timed region)"
  )
else
  serving =
    Bumblebee.Text.text_embedding(model, tokenizer,
      output_pool: :mean_pooling,
      output_attribute: :hidden_state,
      embedding_processor: :l2_norm,
      compile: [batch_size: 16, sequence_length: 128],
      defn_options: [compiler: Emily.Compiler]
    )

  # 16 texts of about 128 tokens each (padded or truncated to 128).
  texts = texts_of.(16)
  run = fn -> Nx.Serving.run(serving, texts) end
  for _ <- 1..3, do: run.()

  times =
    for _ <- 1..20 do
      {us, _} = :timer.tc(run)
      us / 1000
    end

  median = times |> Enum.sort() |> Enum.at(10)

  IO.puts(
    "Emily (#{device}, #{graph}): MiniLM 16 x 128 #{:erlang.float_to_binary(median, decimals: 1)} ms per batch (median of 20, tokenizing included)"
  )
end

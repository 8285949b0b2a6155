# all-MiniLM-L6-v2 through Bumblebee's text_embedding serving on Emily
# (Emily.Backend parameters, Emily.Compiler), batch 16 x 128 tokens, CPU:
# ms per batch, median of 20 after 3 warm-ups. The onnxruntime counterpart
# is bench/minilm_ort.py (same batch, mean pooling and L2 norm).
#
#   mix run bench/minilm_bench.exs [--gpu] [--stock]

Code.require_file("../examples/support/models.exs", __DIR__)

{flags, _, _} = OptionParser.parse(System.argv(), strict: [gpu: :boolean, stock: :boolean])
device = if flags[:gpu], do: :gpu, else: :cpu
Nx.global_default_backend({Emily.Backend, device: device})
dir = Examples.Models.dir!("all-minilm-l6-v2")
{:ok, model} = Bumblebee.load_model({:local, dir})
# As the demo runs it: layer norms and attention on Emily.Fast kernels
# (Emily.Bumblebee.FastKernels; --stock: Bumblebee's graph).
model =
  if flags[:stock],
    do: model,
    else: %{model | model: Emily.Bumblebee.FastKernels.apply(model.model)}

graph = if flags[:stock], do: "stock graph", else: "FastKernels"
{:ok, tokenizer} = Bumblebee.load_tokenizer({:local, dir})

serving =
  Bumblebee.Text.text_embedding(model, tokenizer,
    output_pool: :mean_pooling,
    output_attribute: :hidden_state,
    embedding_processor: :l2_norm,
    compile: [batch_size: 16, sequence_length: 128],
    defn_options: [compiler: Emily.Compiler]
  )

# 16 texts of about 128 tokens each (padded or truncated to 128).
words =
  ~w(the model embeds every sentence of this batch into a vector of three hundred eighty four numbers)

texts =
  for i <- 1..16, do: Enum.map_join(0..127, " ", &Enum.at(words, rem(&1 + i, length(words))))

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

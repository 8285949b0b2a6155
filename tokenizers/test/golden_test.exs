Code.require_file("support_golden.exs", __DIR__)

defmodule Tokenizers.GoldenTest do
  # Every family against HF tokenizers' answers on the 2,000-string corpus
  # (scripts/tokenizers_golden.py): ids, type ids, attention mask, special
  # tokens mask, byte offsets and decode; with and without special tokens,
  # pairs, truncation (both directions) and padding.
  use ExUnit.Case, async: true

  alias Tokenizers.Golden

  @families ~w(bert gpt2 llama3 sp_bpe llama2 unigram clip_like split_behaviours minilm)

  for family <- @families do
    @tag timeout: 300_000
    test "#{family} agrees with HF tokenizers" do
      {summary, failures} = Golden.compare(unquote(family))

      for {kind, {agree, total}} <- Enum.sort(summary) do
        IO.puts("#{unquote(family)} #{kind}: #{agree}/#{total}")
      end

      for {kind, input, fields, expected, actual} <- Enum.take(failures, 5) do
        IO.puts("#{unquote(family)} #{kind} #{inspect(input)} differs in #{inspect(fields)}")

        for f <- fields do
          IO.puts("  expected #{f}: #{inspect(Map.fetch!(expected, f), limit: 60)}")
          IO.puts("  actual   #{f}: #{inspect(Map.fetch!(actual, f), limit: 60)}")
        end
      end

      assert failures == [], "#{length(failures)} differences"
      assert map_size(summary) >= 4
    end
  end
end

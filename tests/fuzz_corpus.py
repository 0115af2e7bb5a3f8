"""Regression corpus of the fuzz tests: every input that once broke a property, replayed by the
``@example`` decorators of ``test_fuzz.py``. Add each new failure here with the fix's reason."""

#: SMILES (and non-SMILES) inputs for prediction.
SMILES_CORPUS = [
    "C" * 1200,  # item 2: one oversized molecule used to end the whole prediction run
]

#: CSV texts for dataset building.
CSV_CORPUS = [
    "smiles,y\nCCO,1e308\nCCC,inf\nC1CC,2\n",  # item 3: 1e308 became inf in float32 labels
    'smiles,y\n"\n",C\n',  # fuzz: a SMILES cell holding a line break split the one-line error in two
]

#: Command lines.
ARGV_CORPUS = [
    ["predict", "--batch-size", "0", "CCO"],  # item 8: traceback instead of an error line
    ["predict", "--device", "\r", "CCO"],  # fuzz: torch's message echoed the carriage return: two error lines
]

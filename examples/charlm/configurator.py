# Read the command line the way nanoGPT's configurator does (exec'd by train.py, into its globals):
#   python train.py config/small.py --dropout=0.1 --compile=False
# A word without "=" names a config file, which is exec'd too; each --key=value overrides a global
# of train.py, its value read with ast.literal_eval (a bare word stays text) and checked to be
# of the global's own type.
import sys
from ast import literal_eval

for arg in sys.argv[1:]:
    if "=" not in arg:
        assert not arg.startswith("--"), f"a flag without a value: {arg}"
        print(f"Overriding config with {arg}:")
        with open(arg) as f:
            print(f.read())
        exec(open(arg).read())
    else:
        assert arg.startswith("--"), f"not a --key=value flag: {arg}"
        key, val = arg.split("=", 1)
        key = key[2:]
        if key in globals():
            try:
                attempt = literal_eval(val)
            except (SyntaxError, ValueError):
                attempt = val
            assert type(attempt) == type(globals()[key]), (  # noqa: E721
                f"--{key}={val}: a {type(attempt).__name__}, the default is a "
                f"{type(globals()[key]).__name__}"
            )
            print(f"Overriding: {key} = {attempt}")
            globals()[key] = attempt
        else:
            raise ValueError(f"Unknown config key: {key}")

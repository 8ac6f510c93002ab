from fslab.cli import app

app(prog_name="fslab")

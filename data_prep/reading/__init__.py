"""Reading the input: finding files, bounded reads, and each file checked and decoded."""

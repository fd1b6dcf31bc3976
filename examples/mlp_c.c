/* PLACEHOLDER until written. */
int main(void) { return 1; }

"""Where accel meets the systems clusters already run: Slurm, Ray and the frameworks, Kubernetes."""

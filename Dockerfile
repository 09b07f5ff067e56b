# spark_log: the broker, the `spark-log` tools and pylog (the PySpark data source) in one image.
#
#   docker build -t spark-log .                 # broker, CLI, Spark master and workers
#   docker build -t spark-log-jupyter --target jupyter .
#
# bookworm is pinned because it ships Java 17 (what Spark 4 runs on); later Debian releases
# moved to Java 21.
FROM python:3.11-slim-bookworm AS base

RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps tini \
    && rm -rf /var/lib/apt/lists/*

# The broker's data lives in /data (a volume); services run as an unprivileged user.
RUN useradd --create-home --uid 1000 spark \
    && mkdir -p /data /opt/spark-work \
    && chown spark:spark /data /opt/spark-work

WORKDIR /opt/spark_log
COPY pyproject.toml setup.py README.md ./
COPY spark_log ./spark_log
# setup.py's native parts (the cleaner's walks, the produce batch check, the hot requests' wire
# work) compile with gcc, which leaves the image again once the package is installed.
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install --no-cache-dir . \
    && apt-get purge -y --auto-remove gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/* /opt/spark_log/build

ENV PYTHONUNBUFFERED=1 \
    PYSPARK_PYTHON=python3 \
    SPARK_LOG_DATA_DIR=/data
USER spark
WORKDIR /home/spark
EXPOSE 9092 9404
ENTRYPOINT ["tini", "--"]
CMD ["spark-log", "broker", "--data-dir", "/data", "--host", "0.0.0.0", "--port", "9092"]

# Jupyter on top of the same package, for the notebooks.
FROM base AS jupyter
USER root
# matplotlib draws the notebook's rate plot (a test-only dependency of the package).
RUN pip install --no-cache-dir "jupyterlab>=4,<5" "matplotlib>=3.8,<4"
USER spark
EXPOSE 8888
CMD ["jupyter", "lab", "--ip=0.0.0.0", "--port=8888", "--no-browser", \
     "--ServerApp.token=", "--notebook-dir=/home/spark/notebooks"]
